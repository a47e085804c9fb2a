package observability

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

// prometheus is a Prometheus server the test started: its own
// configuration and storage in a temporary folder, its web API on a free
// loopback port.
type prometheus struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
}

// startPrometheus runs Prometheus scraping each job's target every second,
// and waits until it is ready. Without the prometheus binary the test is
// skipped, and fails under CI=true (scripts/test-services installs it).
func startPrometheus(t *testing.T, targets map[string]string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Unavailable(t, "no prometheus binary on PATH (Debian's prometheus package; scripts/test-services up installs it)")
		return nil
	}
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nscrape_configs:\n")
	for job, target := range targets {
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: [%q]\n", job, target)
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{t: t, addr: stack.FreeAddr(t), out: &lockedBuffer{}}
	p.cmd = exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.addr, "--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stack.Terminate(p.cmd, exited, 10*time.Second)
		if t.Failed() {
			t.Logf("prometheus output:\n%s", p.out)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", p.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30 s:\n%s", p.out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sample is one element of an instant query's vector result.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query through the HTTP API.
func (p *prometheus) query(expr string) ([]sample, error) {
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string   `json:"resultType"`
			Result     []sample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", expr, body, err)
	}
	if r.Status != "success" || r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: %s %s", expr, r.Status, r.Error)
	}
	return r.Data.Result, nil
}

// waitSeries polls expr (a filter such as `m >= 1`) until it returns a
// series, within d, and returns them.
func (p *prometheus) waitSeries(expr string, d time.Duration) []sample {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		got, err := p.query(expr)
		if err != nil {
			p.t.Fatal(err)
		}
		if len(got) > 0 {
			return got
		}
		if time.Now().After(deadline) {
			targets, _ := http.Get("http://" + p.addr + "/api/v1/targets")
			var health string
			if targets != nil {
				b, _ := io.ReadAll(targets.Body)
				targets.Body.Close()
				health = string(b)
			}
			p.t.Fatalf("Prometheus has no series for %s after %v; targets: %s", expr, d, health)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// lockedBuffer is an io.Writer a process writes to while a test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
