package main

import (
	"io"
	"strings"
	"testing"

	"berth.dev/core/daemon"
)

// TestAuditRetentionFlag: --audit-retention defaults to 90 days (2160h)
// and 0 is refused before anything starts.
func TestAuditRetentionFlag(t *testing.T) {
	var cfg daemon.Config
	if got := serveFlags(&cfg, io.Discard).Lookup("audit-retention").DefValue; got != "2160h0m0s" {
		t.Fatalf("--audit-retention defaults to %s, want 2160h0m0s", got)
	}
	code, _, errOut := runCmd(t, nil, "serve", "--audit-retention", "0")
	if code != 2 || !strings.Contains(errOut, "--audit-retention must be at least 24h") {
		t.Fatalf("--audit-retention 0: exit %d, %q", code, errOut)
	}
}
