package bench

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// failoverRows are P9 and P10: two berth-core processes on one database
// (its own, so nothing else the benchmark runs is disturbed), the second
// waiting for the execution lease. P9 is the time from the active Core's
// SIGKILL until the standby serves; P10 is how long the admin API refuses
// calls across a planned handover (SIGTERM of the active Core): from the
// active Core's last answer (it is asked every 20 ms) until the standby
// serves. Each sample starts a fresh standby; the one that took over is
// the next sample's active Core. defaults runs both at Core's default
// settings (the 15 s lease).
func failoverRows(t testing.TB, samples int, defaults bool) []*row {
	t.Helper()
	p9 := &row{ID: "P9", Kind: bound, Goal: 10, Measure: "standby Core serves after the active one's SIGKILL",
		Baseline: "none, a bound (issue 32: at most 10 s at the default 15 s lease)"}
	p10 := &row{ID: "P10", Kind: bound, Goal: 1, Measure: "admin calls refused across a planned handover (SIGTERM)",
		Baseline: "none, a bound (issue 32: at most 1 s)"}
	dsn := storetest.NewDatabase(t)
	state := stack.CoreStateDir(t)
	opts := stack.CoreOptions{Defaults: defaults}
	active := stack.StartCoreWith(t, dsn, state, true, opts)
	standby := func() *stack.Core {
		o := opts
		o.Args = append(slices.Clone(o.Args), "--master-key-file", filepath.Join(state, "master.key"))
		s := stack.StartCoreWith(t, dsn, stack.CoreStateDir(t), false, o)
		stack.WaitFor(t, 30*time.Second, "the standby waiting for the execution lease", func() bool {
			return strings.Contains(s.Logs(), "another berth-core holds the execution lease; waiting")
		})
		return s
	}
	for range samples {
		next := standby()
		killed := time.Now()
		active.Kill()
		next.WaitServing(60 * time.Second)
		p9.add(time.Since(killed), 0, 0)
		active = next

		next = standby()
		refused := handover(t, active, next)
		p10.add(refused, 0, 0)
		active = next
	}
	return []*row{p9, p10}
}

// handover stops active with SIGTERM while next waits, and returns how
// long the admin API answered no call: from active's last answer (asked
// every 20 ms) until next serves.
func handover(t testing.TB, active, next *stack.Core) time.Duration {
	t.Helper()
	cc, ctx := active.AdminClient(t)
	api := adminv1.NewInstallationServiceClient(cc)
	if _, err := api.GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
		t.Fatalf("the active Core before its SIGTERM: %v", err)
	}
	last := make(chan time.Time, 1)
	go func() {
		answered := time.Now()
		for {
			cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := api.GetInstallation(cctx, &adminv1.GetInstallationRequest{Name: "installation"})
			cancel()
			if err != nil {
				last <- answered
				return
			}
			answered = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	stopped := make(chan struct{})
	go func() { defer close(stopped); active.Stop() }()
	next.WaitServing(60 * time.Second)
	served := time.Now()
	answered := <-last
	<-stopped
	return max(served.Sub(answered), 0)
}
