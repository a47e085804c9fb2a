package chaos

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"berth.dev/sandbox/docker"
	"berth.dev/test/internal/stack"
)

// witnessName is the workspace file each Turn appends its nonce to, at
// witnessFile in the sandbox.
const (
	witnessName = "chaos-witness.log"
	witnessFile = docker.WorkspacePath + "/" + witnessName
)

// witness counts Turn executions by their side effects, independently of
// what Berth reports: each Turn fetches /w/<nonce> from this host-side
// HTTP server over the engine's bridge before it prints its output (so a
// completed Turn has been counted), and appends its nonce to witnessFile
// in its workspace, which the checker reads from the engine
// (workspaceLines). A nonce counted twice is a Turn that ran twice.
type witness struct {
	addr string
	mu   sync.Mutex
	seen map[string]int
}

// startWitness serves the witness on the engine's bridge gateway until
// the test ends.
func startWitness(t *testing.T, cli *client.Client) *witness {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(stack.BridgeGateway(t, cli), "0"))
	if err != nil {
		t.Fatal(err)
	}
	w := &witness{addr: l.Addr().String(), seen: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		nonce, ok := strings.CutPrefix(r.URL.Path, "/w/")
		if !ok || nonce == "" {
			http.NotFound(rw, r)
			return
		}
		w.mu.Lock()
		w.seen[nonce]++
		w.mu.Unlock()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

// count returns how many times the Turn with nonce reported itself.
func (w *witness) count(nonce string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[nonce]
}

// script is the Turn's shell program: record the execution on the host
// and in the workspace, sleep for sleep (whole seconds, none when 0),
// then print the nonce (the exact output checked).
func (w *witness) script(nonce string, sleep time.Duration) []string {
	pause := ""
	if s := int(sleep / time.Second); s > 0 {
		pause = fmt.Sprintf("sleep %d; ", s)
	}
	return []string{"sh", "-c",
		"printf '%s\\n' " + nonce + " >> " + witnessFile + "; " +
			"busybox wget -q -O /dev/null http://" + w.addr + "/w/" + nonce + "; " +
			pause + "printf %s " + nonce}
}

// workspaceLines reads witnessFile from the workspace of every
// allocation of the installation (workspaceHolders) through the Engine
// API and counts each nonce's lines, and how many containers had the file.
// Only the engine's NotFound means no Turn ran there (no file, or the
// container was removed since the listing); any other failure to read the
// file fails the test, never counts as no lines.
func (c *cluster) workspaceLines() (lines map[string]int, files int) {
	c.t.Helper()
	ctx := context.Background()
	list, err := c.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: stack.InstallationFilter(c.inst)})
	if err != nil {
		c.t.Fatalf("list containers: %v", err)
	}
	lines = map[string]int{}
	for _, ct := range workspaceHolders(list.Items) {
		// A snapshot holder mounts the environment volume whole, not its
		// workspace subdirectory at /workspace.
		path := witnessFile
		if ct.Labels[docker.LabelSnapshotRole] == "holder" {
			path = docker.EnvironmentPath + "/" + docker.WorkspaceSubpath + "/" + witnessName
		}
		res, err := c.cli.CopyFromContainer(ctx, ct.ID, client.CopyFromContainerOptions{SourcePath: path})
		switch {
		case cerrdefs.IsNotFound(err):
			continue // no Turn ran there
		case err != nil:
			c.t.Fatalf("I4 witness: reading %s of container %s: %v", path, ct.ID[:12], err)
		}
		b, err := readTarFile(res.Content)
		_ = res.Content.Close()
		if err != nil {
			c.t.Fatalf("I4 witness: reading %s of container %s: %v", path, ct.ID[:12], err)
		}
		files++
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines[l]++
			}
		}
	}
	return lines, files
}

// readTarFile returns the content of the one file of a CopyFromContainer
// archive; an archive without it is an error, never an empty file.
func readTarFile(r io.Reader) ([]byte, error) {
	tr := tar.NewReader(r)
	if _, err := tr.Next(); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the engine's archive holds no file")
		}
		return nil, err
	}
	return io.ReadAll(tr)
}

// checkWitness checks, before the Sessions are deleted, that no Turn of
// list ran twice (I4: at most one host-side report and one workspace line
// per nonce) and that every Turn Core reports COMPLETED ran exactly once by
// the host-side witness and, while its Session still runs, by its
// workspace. It returns how many Turns each witness saw.
func (c *cluster) checkWitness(list []submitted) (host, workspace int) {
	c.t.Helper()
	if c.witness == nil {
		return 0, 0
	}
	lines, _ := c.workspaceLines()
	// A deleted Session's workspace is gone with its container: its Turns
	// are checked by the host-side witness only.
	alive := bySession(c.allocations())
	for _, s := range list {
		h, w := c.witness.count(s.nonce), lines[s.nonce]
		session, _, _ := strings.Cut(s.name, "/turns/")
		if h > 0 {
			host++
		}
		if w > 0 {
			workspace++
		}
		switch {
		case h > 1 || w > 1:
			c.violation("I4", "turn %s ran more than once: %d host-side reports, %d workspace lines", s.name, h, w)
		case s.completed != nil && *s.completed && h != 1:
			c.violation("I4", "turn %s is COMPLETED but the host-side witness saw it %d times, want 1", s.name, h)
		case s.completed != nil && *s.completed && active(alive[session]) && w != 1:
			c.violation("I4", "turn %s is COMPLETED but its workspace has %d lines of it, want 1", s.name, w)
		}
	}
	c.t.Logf("witnesses: %d of %d Turns reported on the host, %d in their workspaces", host, len(list), workspace)
	return host, workspace
}

// workspaceHolders picks, per allocation, the containers whose workspace
// is the allocation's current one: its running incarnation; else its
// stopped ones (not tombstones); else, for a suspended allocation, its
// newest snapshot holder. A consumed snapshot not deleted yet, or an
// abandoned restore's target, is an older copy of a workspace that runs
// elsewhere, so it is never read beside it.
func workspaceHolders(list []container.Summary) []container.Summary {
	byAllocation := map[string][]container.Summary{}
	for _, ct := range list {
		a := ct.Labels[docker.LabelAllocation]
		byAllocation[a] = append(byAllocation[a], ct)
	}
	var out []container.Summary
	for _, cs := range byAllocation {
		var holder *container.Summary
		var incarnations, running []container.Summary
		for i, ct := range cs {
			switch {
			case ct.Labels[docker.LabelTombstone] != "", ct.Labels[docker.LabelSnapshotRole] == "capture":
			case ct.Labels[docker.LabelSnapshotRole] == "holder":
				if holder == nil || ct.Created > holder.Created {
					holder = &cs[i]
				}
			case ct.State == container.StateRunning:
				running = append(running, ct)
			default:
				incarnations = append(incarnations, ct)
			}
		}
		switch {
		case len(running) > 0:
			out = append(out, running...)
		case len(incarnations) > 0:
			out = append(out, incarnations...)
		case holder != nil:
			out = append(out, *holder)
		}
	}
	return out
}
