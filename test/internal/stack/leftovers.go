package stack

import (
	"context"
	"os"
	"sync"
	"time"

	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/testenv"
)

// tracked are the installations the suite's tests created (Track): Run
// checks at the suite's end that the test engine holds nothing of any of
// them.
var tracked struct {
	mu  sync.Mutex
	ids map[string]bool
}

// Track records installation as one of the suite's: at the suite's end
// (Run) the test engine must hold no container or volume labelled with
// it, tombstones included. InstallationID, NewInstallation and
// PrepareNode track theirs; a test that labels resources with an
// installation of its own (a benchmark's baseline) tracks it.
func Track(installation string) {
	if installation == "" {
		return
	}
	tracked.mu.Lock()
	defer tracked.mu.Unlock()
	if tracked.ids == nil {
		tracked.ids = map[string]bool{}
	}
	tracked.ids[installation] = true
}

// engineLeftovers lists, from the test engine itself, every container
// and volume labelled with a tracked installation: what the suite left
// behind once every test's cleanup ran. Without a test engine (the
// variable unset: the suite skipped what needs one) it lists nothing; an
// engine it cannot read is a failure.
func engineLeftovers() ([]string, error) {
	host := os.Getenv(testenv.DockerHostEnv)
	tracked.mu.Lock()
	ids := make([]string, 0, len(tracked.ids))
	for id := range tracked.ids {
		ids = append(ids, id)
	}
	tracked.mu.Unlock()
	if host == "" || len(ids) == 0 {
		return nil, nil
	}
	cli, err := docker.NewClient(host)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return dockertest.Leftovers(ctx, cli, ids)
}
