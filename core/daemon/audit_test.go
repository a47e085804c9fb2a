package daemon

import (
	"errors"
	"testing"
	"time"

	"berth.dev/sandbox/errdefs"
)

// TestAuditRetentionUnderADayIsRefused: Core refuses a retention under
// 24 h (and a negative one) before it opens anything; 0 is the default.
func TestAuditRetentionUnderADayIsRefused(t *testing.T) {
	for _, d := range []string{"23h59m59s", "-1h"} {
		c := &core{cfg: Config{AdminListen: DefaultAdminListen, AuditRetention: mustDuration(t, d)}.withDefaults()}
		if err := c.checkConfig(t.Context()); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("retention %s: %v, want invalid", d, err)
		}
	}
	c := &core{cfg: Config{AdminListen: DefaultAdminListen}.withDefaults()}
	if c.cfg.AuditRetention != DefaultAuditRetention {
		t.Fatalf("the default retention is %s", c.cfg.AuditRetention)
	}
	if err := c.checkConfig(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
