package hostile

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/store/storetest"

	"berth.dev/test/internal/stack"
)

// TestMeasureHostileLoad reports berth-core's resident memory (VmRSS
// sampled every 50 ms, and the kernel's peak VmHWM) and the median latency
// of an authenticated GetInstallation, idle and under two attacks of
// attackWindow each: 10 parallel unauthenticated PreviewDeployment calls
// of about 3.9 MB of nested Structs, and 20 parallel calls with 15 MB
// authorization headers. It asserts nothing: it is the before/after
// measurement of issue 14, item 6 (opt-in, HOSTILE_MEASURE=1).
func TestMeasureHostileLoad(t *testing.T) {
	if os.Getenv("HOSTILE_MEASURE") == "" {
		t.Skip("opt-in measurement: set HOSTILE_MEASURE=1")
	}
	body := nestedPreview(3900<<10, 3000)
	t.Logf("nested body: %d bytes", len(body))

	// Each attack runs on a Core of its own, so one attack's garbage does
	// not count against the next.
	var core *stack.Core
	type result struct {
		name   string
		peak   int64
		median time.Duration
	}
	var results []result
	measure := func(name string, attack func(ctx context.Context)) {
		core = stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
		defer core.Kill() // a Core still busy with the attack may not stop in time
		cc, authed := core.AdminClient(t)
		pid := core.Cmd.Process.Pid
		api := adminv1.NewInstallationServiceClient(cc)
		idle, _, _ := vmRSS(pid)
		ctx, cancel := context.WithTimeout(context.Background(), attackWindow)
		defer cancel()
		var wg sync.WaitGroup
		if attack != nil {
			wg.Go(func() { attack(ctx) })
		}
		var (
			peak      int64
			latencies []time.Duration
			failures  int
		)
		wg.Go(func() {
			for ctx.Err() == nil {
				if rss, _, err := vmRSS(pid); err == nil && rss > peak {
					peak = rss
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		for ctx.Err() == nil {
			start := time.Now()
			cctx, ccancel := context.WithTimeout(authed, 5*time.Second)
			_, err := api.GetInstallation(cctx, &adminv1.GetInstallationRequest{Name: "installation"})
			ccancel()
			if err != nil {
				failures++
			} else {
				latencies = append(latencies, time.Since(start))
			}
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		rss, hwm, _ := vmRSS(pid)
		med := time.Duration(0)
		if len(latencies) > 0 {
			slices.Sort(latencies)
			med = latencies[len(latencies)/2]
		}
		t.Logf("MEASURE %-28s VmRSS idle %5.0f MB, peak %5.0f MB, after %5.0f MB, VmHWM %5.0f MB; GetInstallation median %v over %d calls, %d failed",
			name, mb(idle), mb(peak), mb(rss), mb(hwm), med.Round(100*time.Microsecond), len(latencies), failures)
		results = append(results, result{name: name, peak: max(peak, hwm), median: med})
	}
	// The report make bench prints: each attack against the quiet
	// baseline measured in the same run (the "idle" Core).
	defer func() {
		if len(results) == 0 || results[0].peak == 0 || results[0].median == 0 {
			return
		}
		base := results[0]
		fmt.Printf("\n%-28s %10s %9s %12s %9s\n", "hostile load (berth-core)", "peak RSS", "ratio", "auth median", "ratio")
		for _, r := range results {
			fmt.Printf("%-28s %7.0f MB %8.2fx %12v %8.2fx\n", r.name, mb(r.peak), float64(r.peak)/float64(base.peak),
				r.median.Round(100*time.Microsecond), float64(r.median)/float64(base.median))
		}
	}()

	measure("idle", nil)
	measure("10 x 3.9 MB nested bodies", func(ctx context.Context) {
		var (
			mu       sync.Mutex
			outcomes = map[codes.Code]int{}
		)
		defer func() { t.Logf("nested bodies: outcomes %v", outcomes) }()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				c, err := grpc.NewClient(core.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
				if err != nil {
					return
				}
				defer c.Close()
				for ctx.Err() == nil {
					err := invokeRaw(ctx, c, previewMethod, body)
					if ctx.Err() == nil {
						mu.Lock()
						outcomes[status.Code(err)]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
	})
	measure("20 x 15 MB headers", func(ctx context.Context) {
		block := hugeHeaders(core.AdminAddr(), getInstallationMethod, "", 15<<20)
		var (
			mu       sync.Mutex
			outcomes = map[string]int{}
		)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				for ctx.Err() == nil {
					got, err := sendHeaders(ctx, core.AdminAddr(), block)
					if err != nil {
						got = "error: " + err.Error()
					}
					if ctx.Err() == nil {
						mu.Lock()
						outcomes[got]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		t.Logf("header block %d bytes; outcomes %v", len(block), outcomes)
	})
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
