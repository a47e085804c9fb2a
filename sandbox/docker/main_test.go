package docker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/docker/dockertest"
	"berth.dev/sandbox/testenv"
)

// installations are the ones the acceptance tests created (newEngine).
var installations sync.Map

// TestMain runs the tests, then reads the real engine itself: it must
// hold no container or volume of any installation the tests created,
// tombstones included (each test's sweep removes what it left; this is
// the check that nothing escaped it).
func TestMain(m *testing.M) {
	code := m.Run()
	if left, err := leftovers(); err != nil {
		fmt.Fprintln(os.Stderr, "check the test engine for leftovers:", err)
		code = 1
	} else if len(left) > 0 {
		for _, l := range left {
			fmt.Fprintln(os.Stderr, "the tests left on the engine:", l)
		}
		code = 1
	}
	os.Exit(code)
}

func leftovers() ([]string, error) {
	host := os.Getenv(testenv.DockerHostEnv)
	if host == "" {
		return nil, nil
	}
	cli, err := docker.NewClient(host)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var ids []string
	installations.Range(func(k, _ any) bool {
		ids = append(ids, k.(string))
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return dockertest.Leftovers(ctx, cli, ids)
}
