package microsandbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"berth.dev/sandbox/microsandbox"
	"berth.dev/sandbox/microsandbox/msbtest"
)

// answer is one msb call's observable outcome.
type answer struct {
	code           int
	stdout, stderr string
}

func call(t *testing.T, bin, home string, args ...string) answer {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"MSB_HOME=" + home, "HOME=" + home, "PATH=/usr/bin:/bin", "NO_COLOR=1"}
	cmd.Dir = home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return answer{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// readFields decodes the fields the adapter reads of an inspect answer.
func readFields(t *testing.T, out string) map[string]any {
	t.Helper()
	var rec struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		Config struct {
			Labels    map[string]string `json:"labels"`
			Resources struct {
				CPUs      *int64 `json:"cpus"`
				MemoryMiB *int64 `json:"memory_mib"`
			} `json:"resources"`
			Image struct {
				OCI *struct {
					Reference string `json:"reference"`
					RootDisk  struct {
						SizeMiB *int64 `json:"size_mib"`
					} `json:"root_disk"`
				} `json:"Oci"`
			} `json:"image"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.Config.Image.OCI == nil ||
		rec.Config.Resources.CPUs == nil || rec.Config.Resources.MemoryMiB == nil || rec.Config.Image.OCI.RootDisk.SizeMiB == nil {
		t.Fatalf("inspect answer lacks a field the adapter reads: %v\n%s", err, out)
	}
	return map[string]any{
		"name": rec.Name, "status": rec.Status, "labels": rec.Config.Labels, "image": rec.Config.Image.OCI.Reference,
		"cpus": *rec.Config.Resources.CPUs, "memory": *rec.Config.Resources.MemoryMiB, "disk": *rec.Config.Image.OCI.RootDisk.SizeMiB,
	}
}

// listKeys decodes a list answer into each entry's sorted keys and status.
func listKeys(t *testing.T, out string) []string {
	t.Helper()
	var entries []map[string]any
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("list answer: %v\n%s", err, out)
	}
	var keys []string
	for _, e := range entries {
		var ks []string
		for k := range e {
			ks = append(ks, k)
		}
		keys = append(keys, strings.Join(sortedCopy(ks), ",")+"="+e["status"].(string))
	}
	return keys
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestFixtureMatchesRealMSB runs the same msb calls, with the argv the
// adapter uses, against the real pinned msb and against fakemsb (whose
// sandboxes fail to boot, as the real one's do on a host without
// hardware virtualization), and requires the same exit codes, the same
// first error words and the same JSON fields: the fixture behind the
// contract suite behaves like msb where this host can tell.
func TestFixtureMatchesRealMSB(t *testing.T) {
	bin, home, digest := realMSB(t)
	fake := msbtest.Start(t, uuid.NewString())
	fake.SetBoot(false)
	fake.PutImage(realImage, digest)
	name := "berth-parity-" + uuid.NewString()[:8]
	label := microsandbox.LabelAllocation + "=" + uuid.NewString()
	steps := []struct {
		args    []string
		compare func(t *testing.T, real, fake answer)
	}{
		{[]string{"--version"}, sameOutput},
		{[]string{"inspect", name, "--format", "json"}, sameFailure},
		{[]string{"list", "--format", "json"}, sameOutput},
		{[]string{"image", "inspect", "nope:1", "--format", "json"}, sameFailure},
		{[]string{"run", "--detach", "--name", name, "--pull", "never", "-q", "--label", label, "--cpus", "2", "--memory", "300M",
			"--root-disk", "1024M", "--user", "1000:1000", "--workdir", "/workspace", realImage, "--", "/bin/true"}, sameFailure},
		{[]string{"list", "--label", label, "--format", "json"}, func(t *testing.T, r, f answer) {
			if rk, fk := listKeys(t, r.stdout), listKeys(t, f.stdout); !reflect.DeepEqual(rk, fk) || len(rk) != 1 {
				t.Errorf("list: real %v, fixture %v", rk, fk)
			}
		}},
		{[]string{"inspect", name, "--format", "json"}, func(t *testing.T, r, f answer) {
			if rf, ff := readFields(t, r.stdout), readFields(t, f.stdout); !reflect.DeepEqual(rf, ff) {
				t.Errorf("inspect: real %v, fixture %v", rf, ff)
			}
		}},
		{[]string{"run", "--detach", "--name", name, "--pull", "never", "-q", realImage, "--", "/bin/true"}, sameFailure},
		{[]string{"metrics", name, "--format", "json"}, sameFailure},
		{[]string{"exec", "--no-tty", "-q", "-u", "1000:1000", "-w", "/workspace", name, "--", "/bin/true"}, sameFailure},
		{[]string{"remove", "--force", "-q", "--label", label + "-other"}, sameOutput},
		{[]string{"remove", "--force", "-q", "--label", label}, sameOutput},
		{[]string{"list", "--format", "json"}, sameOutput},
	}
	for _, s := range steps {
		r, f := call(t, bin, home, s.args...), call(t, fake.Bin, fake.Home, s.args...)
		if r.code != f.code {
			t.Errorf("msb %s: exit %d, fixture %d\nreal stderr: %s\nfixture stderr: %s", strings.Join(s.args, " "), r.code, f.code, r.stderr, f.stderr)
			continue
		}
		s.compare(t, r, f)
	}
}

func sameOutput(t *testing.T, r, f answer) {
	t.Helper()
	if strings.TrimSpace(r.stdout) != strings.TrimSpace(f.stdout) {
		t.Errorf("stdout: real %q, fixture %q", r.stdout, f.stdout)
	}
}

// sameFailure compares the first line of stderr up to its last ':' (the
// words before the name or detail).
func sameFailure(t *testing.T, r, f answer) {
	t.Helper()
	if firstWords(r.stderr) != firstWords(f.stderr) {
		t.Errorf("stderr: real %q, fixture %q", r.stderr, f.stderr)
	}
}

func firstWords(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if i := strings.Index(line, ":"); i >= 0 {
		if j := strings.Index(line[i+1:], ":"); j >= 0 {
			return line[:i+1+j]
		}
	}
	return line
}
