package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox/docker"

	"berth.dev/test/internal/stack"
)

// credentialWatch is what watchCredentials saw: the Runtime containers
// started during the run, the device credentials read from them (each
// registered as a secret the log scan looks for), those removed before
// they could be read, and the reads that failed otherwise.
type credentialWatch struct {
	mu                   sync.Mutex
	started, found, gone int
	failures             []string
}

// watchCredentials reads, as each of the installation's Runtime
// containers starts (its container event start; not a tombstone or a
// snapshot's container), the device credential from its bootstrap file
// and registers it with the log scan: every credential a Runtime could
// present to Core's gateway during the run, also of Sessions deleted
// before the scenario's end. Clusters that run Turns only: without the
// gateway no Runtime presents one. checkCredentials, from invariants,
// fails the scenario when none was read.
func (c *cluster) watchCredentials() {
	w := &credentialWatch{}
	c.creds = w
	c.watch(func(m events.Message) {
		a := m.Actor.Attributes
		if m.Action != events.ActionStart || a[docker.LabelAllocation] == "" || a[docker.LabelTombstone] != "" || a[docker.LabelSnapshotRole] != "" {
			return
		}
		cred, err := c.readCredential(context.Background(), m.Actor.ID)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.started++
		switch {
		case cerrdefs.IsNotFound(err):
			w.gone++
		case err != nil:
			w.failures = append(w.failures, fmt.Sprintf("container %s: %v", a["name"], err))
		default:
			addSecret(cred)
			w.found++
		}
	})
}

// checkCredentials is the credential scan's own check, in a cluster that
// watches credentials: a read that failed other than by the container's
// removal is a violation (secrets), and so is a run whose Runtimes
// started without any credential read (the log scan would look for
// none).
func (c *cluster) checkCredentials() {
	c.t.Helper()
	w := c.creds
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	c.t.Logf("device credentials: %d Runtime containers started, %d credentials read for the log scan, %d removed before they could be read",
		w.started, w.found, w.gone)
	for _, f := range w.failures {
		c.violation("secrets", "reading a Runtime's device credential failed: %s", f)
	}
	if w.started > 0 && w.found == 0 {
		c.violation("secrets", "%d Runtime containers started but no device credential was read: the log scan would look for none", w.started)
	}
}

// readCredential reads the device credential from the bootstrap file of
// container id (running or not). The engine's NotFound (no such container
// or file) comes back as it is.
func (c *cluster) readCredential(ctx context.Context, id string) (string, error) {
	res, err := c.cli.CopyFromContainer(ctx, id, client.CopyFromContainerOptions{SourcePath: runtimebootstrap.Path})
	if err != nil {
		return "", err
	}
	defer res.Content.Close()
	b, err := readTarFile(res.Content)
	if err != nil {
		return "", err
	}
	var f struct {
		Credential string `json:"credential"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return "", err
	}
	if f.Credential == "" {
		return "", errors.New("the bootstrap file holds no credential")
	}
	return f.Credential, nil
}

// credentials reads each running container's bootstrap file and registers
// its device credential as a secret the log scan looks for, returning how
// many it read. A container removed meanwhile is skipped; any other
// failure to read fails the test.
func (c *cluster) credentials() int {
	c.t.Helper()
	ctx := context.Background()
	cs, err := c.cli.ContainerList(ctx, client.ContainerListOptions{Filters: stack.InstallationFilter(c.inst)})
	if err != nil {
		c.t.Fatal(err)
	}
	found := 0
	for _, ct := range cs.Items {
		cred, err := c.readCredential(ctx, ct.ID)
		switch {
		case cerrdefs.IsNotFound(err):
			continue
		case err != nil:
			c.t.Fatalf("reading the device credential of container %s: %v", ct.ID, err)
		}
		addSecret(cred)
		found++
	}
	return found
}
