package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"berth.dev/core/daemon"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func runCmd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, nil, "version")
	if want := fmt.Sprintf("berth-core dev (schema version %d)\n", store.SchemaVersion()); code != 0 || out != want {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"serve"}, {"version", "x"}, {"migrate"}, {"migrate", "--nope"}, {"migrate", "--database-url", "u", "extra"}} {
		if code, _, errOut := runCmd(t, nil, args...); code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q; want 2 with a message", args, code, errOut)
		}
	}
}

// TestServeDefaultsComeFromTheDaemon: serve's flags default to core/daemon's
// defaults, and --help shows them.
func TestServeDefaultsComeFromTheDaemon(t *testing.T) {
	var cfg daemon.Config
	fs := serveFlags(&cfg, io.Discard)
	for name, want := range map[string]string{
		"state-dir":          daemon.DefaultStateDir,
		"admin-listen":       daemon.DefaultAdminListen,
		"listen":             daemon.DefaultListen,
		"runtime-keepalive":  daemon.DefaultRuntimeKeepalive.String(),
		"lease-ttl":          daemon.DefaultLeaseTTL.String(),
		"node-interval":      daemon.DefaultNodeInterval.String(),
		"lifecycle-interval": daemon.DefaultLifecycleInterval.String(),
	} {
		if got := fs.Lookup(name).DefValue; got != want {
			t.Errorf("--%s defaults to %q, want %q", name, got, want)
		}
	}
	if daemon.DefaultLifecycleInterval != 2*time.Second {
		t.Errorf("the lifecycle interval Core has always run with is 2s, not %v", daemon.DefaultLifecycleInterval)
	}
	code, _, errOut := runCmd(t, nil, "serve", "--help")
	if code != 0 || !strings.Contains(errOut, "(default "+daemon.DefaultLifecycleInterval.String()+")") ||
		!strings.Contains(errOut, "(default "+daemon.DefaultRuntimeKeepalive.String()+")") {
		t.Errorf("serve --help: exit %d, without the effective defaults:\n%s", code, errOut)
	}
}

func TestMigrateNeverPrintsThePassword(t *testing.T) {
	const password = "hunter2-do-not-print"
	dsn := "postgres://berth:" + password + "@/berth?host=/nonexistent-berth-socket-dir&connect_timeout=2"
	for _, tt := range []struct {
		args []string
		env  map[string]string
	}{
		{[]string{"migrate", "--database-url", dsn}, nil},
		{[]string{"migrate"}, map[string]string{databaseURLEnv: dsn}},
		{[]string{"migrate", "--database-url", "postgres://berth:" + password + "@[::1/x"}, nil},
	} {
		code, out, errOut := runCmd(t, tt.env, tt.args...)
		if code != 1 {
			t.Errorf("exit %d, want 1 (stderr %q)", code, errOut)
		}
		if strings.Contains(out+errOut, password) {
			t.Errorf("output carries the password: %q %q", out, errOut)
		}
	}
}

func TestMigrate(t *testing.T) {
	dsn := storetest.NewDatabase(t)
	for range 2 {
		code, out, errOut := runCmd(t, nil, "migrate", "--database-url", dsn)
		if want := fmt.Sprintf("schema at version %d\n", store.SchemaVersion()); code != 0 || out != want || errOut != "" {
			t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := store.CheckSchema(ctx, st.Pool()); err != nil {
		t.Errorf("after berth-core migrate: %v", err)
	}
}
