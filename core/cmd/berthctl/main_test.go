package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
)

// runCmd runs berthctl in process with an empty environment but for
// BERTHCTL_CONFIG (a file that does not exist).
func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "berthctl.json")
	getenv := func(k string) string {
		if k == "BERTHCTL_CONFIG" {
			return cfg
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code = run(args, getenv, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestUsageErrors: a command line berthctl cannot run exits 2 with the
// reason on stderr, before any connection is tried.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"node"},
		{"node", "bogus"},
		{"node", "list", "--bogus"},
		{"node", "list", "extra"},
		{"node", "get"},
		{"node", "token", "revoke"},
		{"-o", "yaml", "node", "list"},
		{"turn", "run"},
		{"turn", "run", "s"},
		{"turn", "run", "s", "--shell", "true", "--", "true"},
		{"turn", "run", "s", "x", "--", "true"},
		{"turn", "run", "-o", "json", "s", "--", "true"},
		{"deployment", "replace", "--memory-bytes", "1Gi"},
		{"deployment", "preview", "--memory-bytes", "lots"},
		{"login"},
		{"cp", "a"},
		{"cp", "a", "b"},
		{"cp", "sessions/x:a", "sessions/y:b"},
		{"cp", "--raw", "a", "sessions/x:b"},
	} {
		code, out, errOut := runCmd(t, "", args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 with the reason", args, code, out, errOut)
		}
	}
}

func TestNotLoggedIn(t *testing.T) {
	code, _, errOut := runCmd(t, "", "session", "list")
	if code != 1 || !strings.HasPrefix(errOut, "error: not_logged_in: ") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"turn", "run", "--help"}, {"help", "node"}, {"cp", "--help"}} {
		if code, out, _ := runCmd(t, "", args...); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%q: exit %d, %q", args, code, out)
		}
	}
}

func TestExitCode(t *testing.T) {
	var errOut bytes.Buffer
	a := &app{stderr: &errOut, started: true}
	if code := a.exitCode(&exitError{code: 3}); code != 3 || errOut.Len() != 0 {
		t.Errorf("a Turn's exit status: %d, %q", code, errOut.String())
	}
	if code := a.exitCode(&exitError{code: 130, msg: "turn_cancelled: t was cancelled"}); code != 130 || errOut.String() != "error: turn_cancelled: t was cancelled\n" {
		t.Errorf("a cancelled Turn: %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := a.exitCode(errors.New("boom")); code != 1 || errOut.String() != "error: boom\n" {
		t.Errorf("an error: %d, %q", code, errOut.String())
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "536870912": 536870912, "512Mi": 512 << 20, "2Gi": 2 << 30, "1Ti": 1 << 40, "3Ki": 3 << 10} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5Gi", "1G", "Mi", "9999999999Ti"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
	for n, want := range map[int64]string{0: "0", 1023: "1023", 512 << 20: "536870912 (512Mi)", 25275990016: "25275990016 (23.5Gi)"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCommandShownAsShellLine(t *testing.T) {
	argv := func(args ...string) *adminv1.Command {
		return &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: args}}}
	}
	for _, c := range []struct {
		cmd  *adminv1.Command
		want string
	}{
		{argv("ls", "-l", "/workspace"), "ls -l /workspace"},
		{argv("sh", "-c", "echo it's"), `sh -c 'echo it'\''s'`},
		{argv("printf", ""), "printf ''"},
		{&adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "make test"}}, "make test"},
	} {
		if got := command(c.cmd); got != c.want {
			t.Errorf("command = %q, want %q", got, c.want)
		}
	}
}

func TestListReadsEveryPage(t *testing.T) {
	pages := map[string][]int{"": {1, 2}, "b": {3}, "c": {4, 5}}
	nexts := map[string]string{"": "b", "b": "c", "c": ""}
	fetch := func(size int32, token string) ([]int, string, error) { return pages[token], nexts[token], nil }
	if got, next, err := list(page{}, fetch); err != nil || next != "" || len(got) != 5 || got[4] != 5 {
		t.Errorf("every page: %v %q %v", got, next, err)
	}
	if got, next, err := list(page{size: 2, token: "b"}, fetch); err != nil || next != "c" || len(got) != 1 || got[0] != 3 {
		t.Errorf("one page: %v %q %v", got, next, err)
	}
}

// TestLoginReplacesABrokenConfig: login never reads the stored settings,
// nor does a command whose flags give both, so a broken file stops
// neither (they fail here on the closed port, not on the file).
func TestLoginReplacesABrokenConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, token := filepath.Join(dir, "berthctl.json"), filepath.Join(dir, "token")
	if err := os.WriteFile(cfg, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("berth-admin-v1.x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "BERTHCTL_CONFIG" {
			return cfg
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code := run([]string{"session", "list", "--address", "127.0.0.1:1"}, getenv, nil, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "error: config_invalid: ") {
		t.Fatalf("a command that needs the broken config: %d %q", code, errOut.String())
	}
	errOut.Reset()
	code = run([]string{"session", "list", "--address", "127.0.0.1:1", "--token-file", token}, getenv, nil, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "error: core_unreachable: ") {
		t.Fatalf("a command whose flags say everything: %d %q", code, errOut.String())
	}
	errOut.Reset()
	code = run([]string{"login", "--address", "127.0.0.1:1", "--token-file", token}, getenv, nil, &out, &errOut)
	if code != 1 || !strings.HasPrefix(errOut.String(), "error: core_unreachable: cannot reach the admin API at 127.0.0.1:1") {
		t.Fatalf("login with a broken config: %d %q", code, errOut.String())
	}
}

// TestDeploymentSuspensionFlagsAndDisplay: --no-suspension puts the
// explicit "off" in the candidate and no flag leaves the policy out (the
// provider's defaults); a shown deployment says off, or the policy.
func TestDeploymentSuspensionFlagsAndDisplay(t *testing.T) {
	candidate := func(args ...string) *adminv1.DeploymentCandidate {
		t.Helper()
		var cf candidateFlags
		cmd := &cobra.Command{Use: "preview"}
		cf.flags(cmd.Flags())
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		c, err := cf.candidate(cmd, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if p := candidate("--provider", "docker", "--no-suspension").GetSpecification().GetSuspension(); !p.GetDisabled() || p.GetIdle() != nil {
		t.Errorf("--no-suspension: policy %v", p)
	}
	if p := candidate("--provider", "docker", "--max-active", "2").GetSpecification().GetSuspension(); p != nil {
		t.Errorf("no suspension flag: policy %v, want none (the defaults)", p)
	}
	for _, tc := range []struct {
		policy *adminv1.SuspensionPolicy
		want   string
	}{
		{&adminv1.SuspensionPolicy{Disabled: true}, "SUSPENSION:\toff\n"},
		{&adminv1.SuspensionPolicy{Idle: durationpb.New(15 * time.Minute), Retention: durationpb.New(168 * time.Hour)},
			"SUSPENSION:\tafter 15m0s idle, snapshots kept 168h0m0s\n"},
	} {
		var b bytes.Buffer
		deploymentFields(&b, &adminv1.Deployment{ProviderKind: "docker", Specification: &adminv1.Specification{Suspension: tc.policy}}, false)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("policy %v shown as:\n%s", tc.policy, b.String())
		}
	}
}

// TestDeploymentCredentialNeverInArgv: a direct provider's candidate
// (E2B's) is given with its public configuration on the command line and
// its credential from --credential-file, a file or stdin, so the key
// never is an argument; the flag overrides -f's credential; a file that
// is not a JSON object is refused naming the file only, never its bytes;
// -f and --credential-file cannot both read stdin.
func TestDeploymentCredentialNeverInArgv(t *testing.T) {
	const key = "e2b_0123456789abcdef-not-a-real-key"
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	credential := file("credential.json", `{"api_key":"`+key+`"}`+"\n")
	candidateFile := file("candidate.json", `{"providerKind":"e2b","credential":{"api_key":"from-the-candidate-file"}}`)
	parse := func(stdin string, args ...string) (*adminv1.DeploymentCandidate, error) {
		t.Helper()
		var cf candidateFlags
		cmd := &cobra.Command{Use: "preview"}
		cf.flags(cmd.Flags())
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return cf.candidate(cmd, strings.NewReader(stdin))
	}
	apiKey := func(c *adminv1.DeploymentCandidate) string {
		return c.GetCredential().GetFields()["api_key"].GetStringValue()
	}
	public := []string{"--provider", "e2b", "--configuration", `{"template":"berth-runtime-1-2-3","lease_seconds":3600}`}
	for _, tc := range []struct {
		name, stdin string
		args        []string
	}{
		{"a file", "", append(slices.Clone(public), "--credential-file", credential)},
		{"stdin", `{"api_key":"` + key + `"}`, append(slices.Clone(public), "--credential-file", "-")},
		{"over -f's credential", "", append(slices.Clone(public), "-f", candidateFile, "--credential-file", credential)},
	} {
		c, err := parse(tc.stdin, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		cfg := c.GetConfiguration().GetFields()
		if apiKey(c) != key || c.GetProviderKind() != "e2b" || cfg["template"].GetStringValue() != "berth-runtime-1-2-3" ||
			cfg["lease_seconds"].GetNumberValue() != 3600 {
			t.Errorf("%s: candidate %v", tc.name, c)
		}
		if slices.ContainsFunc(tc.args, func(a string) bool { return strings.Contains(a, key) }) {
			t.Fatalf("%s: the key is in argv", tc.name)
		}
	}
	if c, err := parse("", "-f", candidateFile); err != nil || apiKey(c) != "from-the-candidate-file" {
		t.Errorf("-f alone: %v, %v", c, err)
	}

	// Refusals: exit 1 or 2 with the reason, the secret never echoed.
	notJSON := file("not-json", key+"\n")
	for _, tc := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"deployment", "preview", "--credential-file", notJSON}, 1,
			"error: credential_invalid: " + notJSON + " is not a JSON object"},
		{key, []string{"deployment", "commit", "--credential-file", "-"}, 1, "error: credential_invalid: stdin is not a JSON object"},
		{"", []string{"deployment", "preview", "--credential-file", filepath.Join(dir, "missing")}, 1, "error: "},
		{"{}", []string{"deployment", "preview", "-f", "-", "--credential-file", "-"}, 2,
			"error: -f and --credential-file cannot both read stdin"},
		{"", []string{"deployment", "preview", "--configuration", `["template"]`}, 2,
			"error: --configuration is not a JSON object"},
	} {
		code, out, errOut := runCmd(t, tc.stdin, tc.args...)
		if code != tc.code || out != "" || !strings.HasPrefix(errOut, tc.want) || strings.Contains(errOut, key) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}
