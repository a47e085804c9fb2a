package berthctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/e2b/e2btest"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// TestE2BDeploymentWithBerthctl runs deploy/README.md's "Running
// sandboxes on E2B" commands with the real berthctl against a real
// berth-core whose E2B deployment points at the loopback E2B fixture
// (the real adapter over HTTP): the candidate from a file and the key
// from --credential-file, a file or stdin, never argv; preview; a commit
// with a key E2B refuses, refused deployment_candidate_not_ready
// (credential_rejected) with nothing committed; the commit; DIRECT
// GENERATIONS ready; a key replacement with --update-mask credential; a
// new template with --update-mask configuration, which keeps the key and
// the other selectors.
// No berthctl output and no line of Core's log carries a key.
func TestE2BDeploymentWithBerthctl(t *testing.T) {
	f := e2btest.Start(t)
	addr := stack.FreeAddrOn(t, "127.0.0.1")
	core := stack.StartCoreWith(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true,
		stack.CoreOptions{PublicURL: "http://" + addr, RuntimeListen: addr})
	c := newCtl(t, core.AdminToken(t))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
	})
	c.ok("login", "--address", core.AdminAddr(), "--token-file", filepath.Join(core.StateDir, "admin-token"))

	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := f.AddTeam("team-b")
	keys := []string{f.Key, newKey, "e2b_not_a_key_of_any_team"}
	credential := func(key string) string { return `{"api_key": "` + key + `"}` + "\n" }
	keyFile := file("e2b-credential.json", credential(f.Key))
	newKeyFile := file("e2b-credential-new.json", credential(newKey))
	wrongKeyFile := file("e2b-credential-wrong.json", credential(keys[2]))
	candidate := file("e2b-candidate.json", `{
  "providerKind": "e2b",
  "configuration": {
    "api_url": "`+f.URL+`",
    "sandbox_url": "`+f.URL+`",
    "template": "`+e2btest.Template+`",
    "lease_seconds": 3600
  },
  "specification": {
    "cpuMillis": "2000",
    "memoryBytes": "2147483648",
    "diskBytes": "10737418240",
    "maxActive": 20,
    "maxRetained": 0
  }
}
`)
	noKey := func(r result) result {
		t.Helper()
		for _, k := range keys {
			if strings.Contains(r.stdout+r.stderr, k) || strings.Contains(strings.Join(r.args, " "), k) {
				t.Fatalf("a key is in berthctl's argv or output: %v", r)
			}
		}
		return r
	}

	r := noKey(c.ok("deployment", "preview", "-f", candidate, "--credential-file", keyFile))
	if value(t, r.stdout, "PROVIDER") != "e2b" || value(t, r.stdout, "CREDENTIAL STORED") != "yes" ||
		value(t, r.stdout, "CHANGED") != "yes" || value(t, r.stdout, "EXPECTED GENERATION") != "0" ||
		!strings.Contains(value(t, r.stdout, "CONFIGURATION"), e2btest.Template) {
		t.Fatalf("deployment preview: %v", r)
	}

	noKey(c.fails(1, "error: deployment_candidate_not_ready: candidate not ready (credential_rejected)",
		"deployment", "commit", "-f", candidate, "--credential-file", wrongKeyFile, "--expected-generation", "0"))
	if r := noKey(c.ok("deployment", "get")); value(t, r.stdout, "GENERATION") != "0" {
		t.Fatalf("a refused commit committed: %v", r)
	}

	// The key on stdin.
	r = noKey(c.runEnv([]byte(credential(f.Key)), nil, "deployment", "commit", "-f", candidate, "--credential-file", "-",
		"--expected-generation", "0"))
	if r.code != 0 || value(t, r.stdout, "GENERATION") != "1" || value(t, r.stdout, "PROVIDER") != "e2b" {
		t.Fatalf("deployment commit: %v", r)
	}
	waitDirect := func(want string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			r := noKey(c.ok("deployment", "get"))
			if strings.Contains(r.stdout, "DIRECT GENERATIONS:") && value(t, r.stdout, "DIRECT GENERATIONS") == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("DIRECT GENERATIONS is not %q within a minute: %v", want, r)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitDirect("1 ready")
	var got adminv1.GetDeploymentResponse
	c.json(&got, "deployment", "get")
	if g := got.GetDeployment().GetDirectGenerations(); len(g) != 1 || !g[0].GetReady() || g[0].GetDiagnosticCode() != "" {
		t.Fatalf("direct_generations: %v", g)
	}

	// A key replacement: preview, then replace (nothing is held, so there
	// is no sandbox for the new key to reach).
	r = noKey(c.ok("deployment", "preview", "--credential-file", newKeyFile, "--update-mask", "credential"))
	if value(t, r.stdout, "CHANGED") != "yes" || value(t, r.stdout, "EXPECTED GENERATION") != "1" {
		t.Fatalf("deployment preview of the key: %v", r)
	}
	r = noKey(c.ok("deployment", "replace", "--credential-file", newKeyFile, "--update-mask", "credential", "--expected-generation", "1"))
	if value(t, r.stdout, "GENERATION") != "2" || !strings.Contains(value(t, r.stdout, "CONFIGURATION"), e2btest.Template) {
		t.Fatalf("deployment replace of the key: %v", r)
	}
	waitDirect("2 ready")

	// A new template (a new release's) replaces the configuration only:
	// the other selectors and the key are inherited.
	r = noKey(c.ok("deployment", "replace", "--configuration", `{"template":"berth-runtime-1-2-4"}`, "--update-mask", "configuration",
		"--expected-generation", "2"))
	var cfg map[string]any
	if err := json.Unmarshal([]byte(value(t, r.stdout, "CONFIGURATION")), &cfg); err != nil {
		t.Fatalf("CONFIGURATION: %v in %v", err, r)
	}
	if value(t, r.stdout, "GENERATION") != "3" || value(t, r.stdout, "CREDENTIAL STORED") != "yes" ||
		cfg["template"] != "berth-runtime-1-2-4" || cfg["api_url"] != f.URL || cfg["lease_seconds"] != float64(3600) {
		t.Fatalf("deployment replace of the template: %v", r)
	}
	waitDirect("3 ready")

	for _, k := range keys {
		if strings.Contains(core.Logs(), k) {
			t.Fatal("a line of Core's log carries a key")
		}
	}
}
