package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Version is the msb release this fixture imitates.
const Version = "0.6.18"

// State is the fixture's state file (msbtest reads and writes it too).
type State struct {
	Images    map[string]string   `json:"images"`
	Sandboxes map[string]*Sandbox `json:"sandboxes"`
	// Boot is what booting does: "ok" (the sandbox runs) or "fail" (as on
	// a host without hardware virtualization: the record stays Stopped).
	Boot   string  `json:"boot"`
	Faults []Fault `json:"faults"`
	Calls  []Call  `json:"calls"`
}

// Sandbox is one record.
type Sandbox struct {
	Name       string            `json:"name"`
	Status     string            `json:"status"`
	Image      string            `json:"image"`
	Digest     string            `json:"digest"`
	Labels     map[string]string `json:"labels"`
	CPUs       int64             `json:"cpus"`
	MemoryMiB  int64             `json:"memory_mib"`
	DiskMiB    int64             `json:"disk_mib"`
	User       string            `json:"user"`
	Workdir    string            `json:"workdir"`
	Cmd        []string          `json:"cmd"`
	Mounts     []string          `json:"mounts"`
	Network    []string          `json:"network"`
	CreatedAt  string            `json:"created_at"`
	CPUTimeNs  uint64            `json:"cpu_time_ns"`
	MemoryUsed uint64            `json:"memory_used"`
}

// Fault is one armed fault: Kind "transport" (killed before doing
// anything), "dispatch" (does the work, tells the test, then hangs until
// killed), "cleanup" (remove stops the VM, keeps the record, fails),
// "fail" (exit 1 before doing anything).
type Fault struct {
	Call string `json:"call"`
	Kind string `json:"kind"`
}

// Call is one recorded call.
type Call struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

func main() {
	code, msg := run(os.Args[1:])
	if msg != "" {
		fmt.Fprint(os.Stderr, msg)
	}
	os.Exit(code)
}

func run(args []string) (int, string) {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("msb " + Version)
		return 0, ""
	}
	if len(args) == 0 {
		return 2, "error: a subcommand is required\n"
	}
	dir := filepath.Join(os.Getenv("MSB_HOME"), "fake")
	unlock, err := lock(dir)
	if err != nil {
		return 1, "error: fixture lock: " + err.Error() + "\n"
	}
	st, err := load(dir)
	if err != nil {
		unlock()
		return 1, "error: fixture state: " + err.Error() + "\n"
	}
	name := callName(args)
	st.Calls = append(st.Calls, Call{Name: name, Args: args})
	fault := st.take(name)
	if fault == "hang" {
		// Received, never performed, never answered.
		if err := save(dir, st); err != nil {
			unlock()
			return 1, "error: fixture state: " + err.Error() + "\n"
		}
		unlock()
		hang(dir)
	}
	if fault == "transport" || fault == "fail" {
		if err := save(dir, st); err != nil {
			unlock()
			return 1, "error: fixture state: " + err.Error() + "\n"
		}
		unlock()
		if fault == "transport" {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		return 1, "error: injected failure at " + filepath.Join(dir, "db") + "\n"
	}
	code, out, msg := dispatch(st, dir, name, args, fault)
	if err := save(dir, st); err != nil {
		unlock()
		return 1, "error: fixture state: " + err.Error() + "\n"
	}
	unlock()
	if name == "exec" && code == 0 && msg == "" {
		code, msg = runExec(dir, args)
	} else if fault != "dispatch" {
		fmt.Print(out)
	}
	if fault == "dispatch" {
		// The work is done and saved; the answer is never given.
		hang(dir)
	}
	return code, msg
}

// hang tells the test (msbtest watches the marker) and waits to be killed.
func hang(dir string) {
	_ = os.WriteFile(filepath.Join(dir, "dispatched"), nil, 0o600)
	for {
		time.Sleep(time.Hour)
	}
}

// callName is the recorded name: the subcommand ("image.inspect" for the
// image group).
func callName(args []string) string {
	if args[0] == "image" && len(args) > 1 {
		return "image." + args[1]
	}
	return args[0]
}

func (st *State) take(name string) string {
	for i, f := range st.Faults {
		if f.Call == name {
			st.Faults = slices.Delete(st.Faults, i, i+1)
			return f.Kind
		}
	}
	return ""
}

func dispatch(st *State, dir, name string, args []string, fault string) (int, string, string) {
	switch name {
	case "run":
		return runDetached(st, args[1:])
	case "inspect":
		return inspect(st, args[1:])
	case "list":
		if fault == "empty" {
			return 0, "[]\n", ""
		}
		return list(st, args[1:])
	case "remove":
		return remove(st, args[1:], fault)
	case "exec":
		return prepareExec(st, args[1:])
	case "metrics":
		return metrics(st, args[1:])
	case "image.inspect":
		return imageInspect(st, args[2:])
	}
	return 2, "", "error: unrecognized subcommand '" + name + "'\n"
}

// flags splits args into the values of the flags in valued (repeatable),
// the switches, the positionals and what follows "--".
type parsed struct {
	values     map[string][]string
	switches   map[string]bool
	positional []string
	rest       []string
}

func parse(args []string, valued, switches []string) (parsed, string) {
	p := parsed{values: map[string][]string{}, switches: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			p.rest = args[i+1:]
			return p, ""
		case slices.Contains(valued, a):
			if i+1 >= len(args) {
				return p, "error: a value is required for '" + a + "'\n"
			}
			p.values[a] = append(p.values[a], args[i+1])
			i++
		case slices.Contains(switches, a):
			p.switches[a] = true
		case strings.HasPrefix(a, "-"):
			return p, "error: unexpected argument '" + a + "' found\n"
		default:
			p.positional = append(p.positional, a)
		}
	}
	return p, ""
}

func one(p parsed, flag string) string {
	if v := p.values[flag]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func labels(selectors []string) (map[string]string, string) {
	out := map[string]string{}
	for _, s := range selectors {
		k, v, _ := strings.Cut(s, "=")
		if k == "" {
			return nil, "error: invalid label '" + s + "'\n"
		}
		out[k] = v
	}
	return out, ""
}

func mib(s string) (int64, bool) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "M"):
		s = strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		s, mult = strings.TrimSuffix(s, "G"), 1024
	default:
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n * mult, err == nil && n > 0
}

var runValued = []string{"--name", "--pull", "--label", "--cpus", "--memory", "--root-disk", "--user", "--workdir",
	"--security", "--tmpfs", "--mount-dir", "--net", "--net-rule"}

func runDetached(st *State, args []string) (int, string, string) {
	p, msg := parse(args, runValued, []string{"--detach", "-d", "-q", "--no-net"})
	if msg != "" {
		return 2, "", msg
	}
	name := one(p, "--name")
	if existing, ok := st.Sandboxes[name]; ok {
		// msb run reuses an existing named sandbox: it starts it.
		msg := "warn: sandbox '" + name + "' already exists; creation flags ignored (use --replace to recreate)\n"
		return boot(st, existing, msg)
	}
	sb, msg := newSandbox(st, p, name)
	if msg != "" {
		return 1, "", msg
	}
	st.Sandboxes[name] = sb
	return boot(st, sb, "")
}

func newSandbox(st *State, p parsed, name string) (*Sandbox, string) {
	if len(p.positional) != 1 {
		return nil, "error: an image is required\n"
	}
	image := p.positional[0]
	digest, ok := st.Images[image]
	if !ok {
		return nil, "error: image not cached: " + image + "\n"
	}
	lbl, msg := labels(p.values["--label"])
	if msg != "" {
		return nil, msg
	}
	cpus, err := strconv.ParseInt(one(p, "--cpus"), 10, 64)
	mem, okMem := mib(one(p, "--memory"))
	disk, okDisk := mib(one(p, "--root-disk"))
	if err != nil || !okMem || !okDisk {
		return nil, "error: invalid resources\n"
	}
	for _, m := range p.values["--mount-dir"] {
		host, _, _ := strings.Cut(m, ":")
		if fi, err := os.Stat(host); err != nil || !fi.IsDir() {
			return nil, "error: --mount-dir: stat " + host + ": not a directory\n"
		}
	}
	return &Sandbox{
		Name: name, Status: "Stopped", Image: image, Digest: digest, Labels: lbl,
		CPUs: cpus, MemoryMiB: mem, DiskMiB: disk, User: one(p, "--user"), Workdir: one(p, "--workdir"),
		Cmd: p.rest, Mounts: p.values["--mount-dir"], Network: append(p.values["--net"], p.values["--net-rule"]...),
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}, ""
}

func boot(st *State, sb *Sandbox, warn string) (int, string, string) {
	if st.Boot != "ok" {
		sb.Status = "Stopped"
		return 1, "", warn + "error: failed to start \"" + sb.Name + "\"\n  → other: sandbox process exited (exit status: 1) before agent relay became available\n"
	}
	sb.Status = "Running"
	sb.MemoryUsed = uint64(sb.MemoryMiB) << 19
	return 0, sb.Name + "\n", warn
}

func printJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b) + "\n"
}

func notFound(name string) (int, string, string) {
	return 1, "", "error: sandbox not found: " + name + "\n"
}

func inspect(st *State, args []string) (int, string, string) {
	p, msg := parse(args, []string{"--format"}, nil)
	if msg != "" || len(p.positional) != 1 {
		return 2, "", "error: usage: msb inspect NAME\n"
	}
	sb, ok := st.Sandboxes[p.positional[0]]
	if !ok {
		return notFound(p.positional[0])
	}
	return 0, printJSON(inspectJSON(sb)), ""
}

// inspectJSON is the shape of msb 0.6.18's inspect (the keys the adapter
// and an operator read).
func inspectJSON(sb *Sandbox) map[string]any {
	return map[string]any{
		"active_config": nil,
		"config": map[string]any{
			"image": map[string]any{"Oci": map[string]any{
				"reference": sb.Image, "root_disk": map[string]any{"kind": "managed", "size_mib": sb.DiskMiB},
			}},
			"labels":          sb.Labels,
			"manifest_digest": sb.Digest,
			"name":            sb.Name,
			"resources": map[string]any{
				"cpus": sb.CPUs, "max_cpus": sb.CPUs, "memory_mib": sb.MemoryMiB, "max_memory_mib": sb.MemoryMiB,
			},
			"runtime": map[string]any{"cmd": sb.Cmd, "entrypoint": nil, "user": sb.User, "workdir": sb.Workdir},
		},
		"created_at":      sb.CreatedAt,
		"name":            sb.Name,
		"pending_changes": []any{},
		"status":          sb.Status,
		"updated_at":      sb.CreatedAt,
	}
}

func selected(st *State, selectors []string) ([]string, string) {
	want, msg := labels(selectors)
	if msg != "" {
		return nil, msg
	}
	var names []string
	for name, sb := range st.Sandboxes {
		match := true
		for k, v := range want {
			if got, ok := sb.Labels[k]; !ok || got != v {
				match = false
			}
		}
		if match {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names, ""
}

func list(st *State, args []string) (int, string, string) {
	p, msg := parse(args, []string{"--format", "--label"}, nil)
	if msg != "" {
		return 2, "", msg
	}
	names, msg := selected(st, p.values["--label"])
	if msg != "" {
		return 1, "", msg
	}
	out := []map[string]any{}
	for _, n := range names {
		sb := st.Sandboxes[n]
		out = append(out, map[string]any{"created_at": sb.CreatedAt, "image": sb.Image, "name": sb.Name, "status": sb.Status})
	}
	return 0, printJSON(out), ""
}

func remove(st *State, args []string, fault string) (int, string, string) {
	p, msg := parse(args, []string{"--label"}, []string{"--force", "-f", "-q", "--quiet"})
	if msg != "" {
		return 2, "", msg
	}
	names := p.positional
	if len(p.values["--label"]) > 0 {
		more, msg := selected(st, p.values["--label"])
		if msg != "" {
			return 1, "", msg
		}
		names = append(names, more...)
	}
	if len(names) == 0 && len(p.values["--label"]) == 0 {
		return 1, "", "error: specify one or more sandbox names or --label selectors\n"
	}
	failed := ""
	for _, n := range names {
		sb, ok := st.Sandboxes[n]
		switch {
		case !ok:
			failed += "error: sandbox not found: " + n + "\n"
		case fault == "cleanup":
			// Partial cleanup: the VM is stopped, the record stays.
			sb.Status = "Stopped"
			failed += "error: failed to remove sandbox " + n + ": database is locked\n"
		case sb.Status == "Running" && !p.switches["--force"] && !p.switches["-f"]:
			failed += "error: cannot remove sandbox '" + n + "': still running\n"
		default:
			delete(st.Sandboxes, n)
		}
	}
	if failed != "" {
		return 1, "", failed
	}
	return 0, "", ""
}

var execValued = []string{"-u", "--user", "-w", "--workdir", "-e", "--env", "--timeout"}

func prepareExec(st *State, args []string) (int, string, string) {
	p, msg := parse(args, execValued, []string{"--no-tty", "-q", "--quiet"})
	if msg != "" || len(p.positional) != 1 || len(p.rest) == 0 {
		return 2, "", "error: usage: msb exec NAME -- COMMAND...\n"
	}
	sb, ok := st.Sandboxes[p.positional[0]]
	if !ok {
		return notFound(p.positional[0])
	}
	if sb.Status != "Running" {
		// msb exec starts a stopped sandbox first.
		if code, _, msg := boot(st, sb, ""); code != 0 {
			return code, "", msg
		}
	}
	return 0, "", ""
}

// runExec runs the command after "--" on the host, in the fixture's
// scratch directory, with this process's stdin, and exits with its code.
func runExec(dir string, args []string) (int, string) {
	p, _ := parse(args[1:], execValued, []string{"--no-tty", "-q", "--quiet"})
	scratch := filepath.Join(dir, "scratch")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return 1, "error: scratch: " + err.Error() + "\n"
	}
	cmd := exec.Command(p.rest[0], p.rest[1:]...)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = scratch, os.Stdin, os.Stdout, os.Stderr
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + scratch}
	err := cmd.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return exitErr.ExitCode(), ""
	}
	if err != nil {
		return 127, "error: failed to exec \"" + p.rest[0] + "\": not found\n"
	}
	return 0, ""
}

func metrics(st *State, args []string) (int, string, string) {
	p, msg := parse(args, []string{"--format"}, nil)
	if msg != "" || len(p.positional) != 1 {
		return 2, "", "error: usage: msb metrics NAME\n"
	}
	sb, ok := st.Sandboxes[p.positional[0]]
	if !ok || sb.Status != "Running" {
		return 1, "", "error: no metrics recorded for sandbox \"" + p.positional[0] + "\"\n"
	}
	sb.CPUTimeNs += 1_000_000
	return 0, printJSON(map[string]any{
		"name": sb.Name, "state": "running", "cpus": sb.CPUs, "vcpu_time_ns": sb.CPUTimeNs,
		"memory_bytes": sb.MemoryUsed, "memory_limit_bytes": uint64(sb.MemoryMiB) << 20,
	}), ""
}

func imageInspect(st *State, args []string) (int, string, string) {
	p, msg := parse(args, []string{"--format"}, nil)
	if msg != "" || len(p.positional) != 1 {
		return 2, "", "error: usage: msb image inspect REF\n"
	}
	digest, ok := st.Images[p.positional[0]]
	if !ok {
		return 1, "", "error: image not found: " + p.positional[0] + "\n"
	}
	return 0, printJSON(map[string]any{"reference": p.positional[0], "digest": digest}), ""
}

func lock(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

func load(dir string) (*State, error) {
	st := &State{Images: map[string]string{}, Sandboxes: map[string]*Sandbox{}, Boot: "ok"}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if os.IsNotExist(err) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, err
	}
	if st.Sandboxes == nil {
		st.Sandboxes = map[string]*Sandbox{}
	}
	if st.Images == nil {
		st.Images = map[string]string{}
	}
	return st, nil
}

func save(dir string, st *State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}
