package observability

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/docker"
	"berth.dev/sandbox/testenv"

	"berth.dev/test/internal/stack"
)

func TestMain(m *testing.M) { stack.Main(m) }

// createMethod is the node protocol's Create, as otelgrpc names its spans
// and its rpc.method attribute.
const createMethod = "berth.sandboxnode.v1.NodeService/Create"

// TestTelemetry runs one cluster with every telemetry output on (Core's
// --metrics-listen, the node agent's metrics_listen, OTLP traces from
// both to a collector the test serves), creates a Session and runs a Turn
// in it, then checks what an operator would see: one trace from Core's
// lifecycle worker through the node protocol into the node agent and its
// engine calls; Prometheus scraping both processes; log lines carrying
// the trace ids; no secret anywhere.
func TestTelemetry(t *testing.T) {
	host := testenv.DockerHost(t)
	testenv.RuntimeImage(t)
	engine, err := docker.NewClient(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close() })
	col := startCollector(t)
	otelEnv := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + col.Addr, "OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_TRACES_SAMPLER=always_on",
		// Nothing ambient decides for the test.
		"OTEL_TRACES_EXPORTER=", "OTEL_SERVICE_NAME=", "OTEL_SDK_DISABLED=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=", "OTEL_RESOURCE_ATTRIBUTES=",
	}
	coreMetrics, nodeMetrics := stack.FreeAddr(t), stack.FreeAddr(t)
	opts, _ := stack.RuntimeGateway(t, engine)
	opts.Args, opts.Env = []string{"--metrics-listen", coreMetrics}, otelEnv
	c := stack.OneNodeCluster(t, &adminv1.Specification{CpuMillis: 250, MemoryBytes: 256 << 20, DiskBytes: 1 << 30, MaxActive: 4, MaxRetained: 4},
		opts, stack.NodeOptions{Network: "bridge", MetricsListen: nodeMetrics, Env: otelEnv})
	nodeID := strings.TrimPrefix(c.NodeName, "nodes/")

	// A Session whose Runtime runs a Turn.
	sessionsAPI, turnsAPI := adminv1.NewSessionServiceClient(c.CC), adminv1.NewTurnServiceClient(c.CC)
	created, err := sessionsAPI.CreateSession(c.Ctx, &adminv1.CreateSessionRequest{RequestId: uuid.NewString(), Session: &adminv1.Session{}})
	if err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	session := created.GetSession().GetName()
	stack.WaitFor(t, 2*time.Minute, "the Session's Runtime admitted", func() bool {
		got, err := sessionsAPI.GetSession(c.Ctx, &adminv1.GetSessionRequest{Name: session})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetSession().GetEnvironment().GetExecutionAdmitted()
	})
	sub, err := turnsAPI.SubmitTurn(c.Ctx, &adminv1.SubmitTurnRequest{Parent: session, RequestId: uuid.NewString(), Turn: &adminv1.Turn{
		Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "echo traced"}}, Timeout: durationpb.New(time.Minute),
	}})
	if err != nil {
		t.Fatalf("SubmitTurn: %v", err)
	}
	turnID := sub.GetTurn().GetName()[strings.LastIndex(sub.GetTurn().GetName(), "/")+1:]
	stack.WaitFor(t, time.Minute, "the Turn completed", func() bool {
		got, err := turnsAPI.GetTurn(c.Ctx, &adminv1.GetTurnRequest{Name: sub.GetTurn().GetName()})
		if err != nil {
			t.Fatal(err)
		}
		return got.GetTurn().GetState() == adminv1.Turn_STATE_COMPLETED
	})
	allocs, err := adminv1.NewAllocationServiceClient(c.CC).ListAllocations(c.Ctx, &adminv1.ListAllocationsRequest{PageSize: 10})
	if err != nil || len(allocs.GetAllocations()) != 1 {
		t.Fatalf("ListAllocations: %v %v", allocs, err)
	}
	allocation := allocs.GetAllocations()[0].GetName()[strings.LastIndex(allocs.GetAllocations()[0].GetName(), "/")+1:]

	t.Run("one trace from Core's lifecycle worker into the node agent", func(t *testing.T) {
		var core, agent, engineCall, lifecycle span
		stack.WaitFor(t, 30*time.Second, "the Create's spans from both processes", func() bool {
			spans := col.Spans()
			byID := map[string]span{}
			for _, s := range spans {
				byID[s.TraceID+"/"+s.SpanID] = s
			}
			for _, s := range spans {
				if s.Service != "berth-nodeagent" || s.Name != createMethod || s.Kind.String() != "SPAN_KIND_SERVER" {
					continue
				}
				parent, ok := byID[s.TraceID+"/"+s.ParentID]
				if !ok || parent.Service != "berth-core" {
					continue
				}
				agent, core = s, parent
				lifecycle = byID[core.TraceID+"/"+core.ParentID]
				for _, e := range spans {
					if e.Service == "berth-nodeagent" && e.TraceID == agent.TraceID && e.ParentID == agent.SpanID {
						engineCall = e
					}
				}
				return lifecycle.SpanID != "" && engineCall.SpanID != ""
			}
			return false
		})
		// The node agent's server span of Create is the child of Core's
		// client span of the same call, in the same trace.
		if core.Name != createMethod || core.Kind.String() != "SPAN_KIND_CLIENT" || core.Error || agent.Error {
			t.Errorf("Core's span %+v, the node agent's %+v: want the client and server spans of %s, both ok", core, agent, createMethod)
		}
		// Core's call is made by the lifecycle worker's create operation, of
		// this Session's allocation on this node.
		if lifecycle.Service != "berth-core" || lifecycle.Name != "lifecycle.create" ||
			lifecycle.Attrs["berth.allocation"] != allocation || lifecycle.Attrs["berth.node"] != nodeID {
			t.Errorf("the client span's parent %+v, want lifecycle.create of allocation %s on node %s", lifecycle, allocation, nodeID)
		}
		// And under the node agent's span, the adapter's engine calls.
		if !strings.HasPrefix(engineCall.Attrs["url.full"], "http") || engineCall.Kind.String() != "SPAN_KIND_CLIENT" {
			t.Errorf("the node agent's child span %+v, want the Docker client's HTTP call", engineCall)
		}

		// The admin API's call and the Turn are traced too.
		var admin, turn span
		stack.WaitFor(t, 30*time.Second, "the CreateSession and Turn spans", func() bool {
			for _, s := range col.Spans() {
				switch {
				case s.Service == "berth-core" && s.Name == "berth.admin.v1.SessionService/CreateSession" && s.Kind.String() == "SPAN_KIND_SERVER":
					admin = s
				case s.Service == "berth-core" && s.Name == "turn" && s.Attrs["berth.turn"] == turnID:
					turn = s
				}
			}
			return admin.SpanID != "" && turn.SpanID != ""
		})
		if turn.Attrs["berth.turn.state"] != "completed" || turn.ParentID != "" || turn.Error {
			t.Errorf("turn span %+v, want a root span of the completed Turn", turn)
		}
		// Core's log line about the delivery carries the Turn's trace.
		if !logged(t, c.Core.Logs(), "turn delivered", turn.TraceID) {
			t.Errorf("no `turn delivered` log line with trace_id %s:\n%s", turn.TraceID, c.Core.Logs())
		}
	})

	t.Run("Prometheus scrapes Core and the node agent", func(t *testing.T) {
		prom := startPrometheus(t, map[string]string{"berth-core": coreMetrics, "berth-nodeagent": nodeMetrics})
		const within = 30 * time.Second
		prom.waitSeries(`berth_allocations{job="berth-core",state="running"} >= 1`, within)
		prom.waitSeries(`berth_sessions{job="berth-core",state="active"} >= 1`, within)
		prom.waitSeries(`berth_lifecycle_operation_duration_seconds_count{job="berth-core",operation="create",outcome="ok"} >= 1`, within)
		// A node's running compute is observed a page per ObserveBatch call.
		prom.waitSeries(`berth_lifecycle_operation_duration_seconds_count{job="berth-core",operation="observe_batch",outcome="ok"} >= 1`, within)
		ready := prom.waitSeries(`berth_node_ready{job="berth-core"} == 1`, within)
		if len(ready) != 1 || ready[0].Metric["node"] != nodeID {
			t.Errorf("berth_node_ready: %v, want node %s", ready, nodeID)
		}
		prom.waitSeries(`berth_node_connected{job="berth-core",node="`+nodeID+`"} == 1`, within)
		prom.waitSeries(`berth_turn_queue_duration_seconds_count{job="berth-core"} >= 1`, within)
		prom.waitSeries(`berth_turn_run_duration_seconds_count{job="berth-core",state="completed"} >= 1`, within)
		prom.waitSeries(`berth_gateway_connections{job="berth-core"} >= 1`, within)
		prom.waitSeries(`berth_db_pool_connections_max{job="berth-core"} >= 1`, within)
		prom.waitSeries(`berth_db_pool_acquires_total{job="berth-core"} >= 1`, within)
		prom.waitSeries(`rpc_client_call_duration_seconds_count{job="berth-core",rpc_method="`+createMethod+`"} >= 1`, within)
		prom.waitSeries(`rpc_server_call_duration_seconds_count{job="berth-core",rpc_method="berth.admin.v1.SessionService/CreateSession"} >= 1`, within)
		// The node agent: its calls by method and code, its generations.
		calls := prom.waitSeries(`rpc_server_call_duration_seconds_count{job="berth-nodeagent",rpc_method="`+createMethod+`"} >= 1`, within)
		if code := calls[0].Metric["rpc_response_status_code"]; code != "OK" {
			t.Errorf("the node agent's Create calls: %v, want status code OK", calls[0].Metric)
		}
		prom.waitSeries(`berth_nodeagent_generations{job="berth-nodeagent",ready="true"} >= 1`, within)
		prom.waitSeries(`berth_nodeagent_operations_active{job="berth-nodeagent"} >= 0`, within)
		// No Create of unknown outcome here: the node holds no tombstone.
		prom.waitSeries(`berth_nodeagent_creation_receipts_held{job="berth-nodeagent"} == 0`, within)
	})

	t.Run("no secret in metrics, spans or logs", func(t *testing.T) {
		token := c.Core.AdminToken(t)
		secrets := map[string]string{"the admin token": token, "the database URL": c.Core.DSN}
		for what, body := range map[string]string{
			"Core's /metrics": get(t, "http://"+coreMetrics+"/metrics"), "the node agent's /metrics": get(t, "http://"+nodeMetrics+"/metrics"),
			"Core's log": c.Core.Logs(), "the node agent's log": c.Node.Logs(),
		} {
			for name, secret := range secrets {
				if strings.Contains(body, secret) {
					t.Errorf("%s shows %s", what, name)
				}
			}
		}
		for _, s := range col.Spans() {
			for k, v := range s.Attrs {
				for name, secret := range secrets {
					if strings.Contains(v, secret) || strings.Contains(strings.ToLower(k), "authorization") {
						t.Errorf("span %s of %s: attribute %s shows %s", s.Name, s.Service, k, name)
					}
				}
			}
		}
	})
}

// logged reports whether logs has a JSON line with message msg and
// trace_id traceID.
func logged(t *testing.T, logs, msg, traceID string) bool {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		var e struct {
			Msg     string `json:"msg"`
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
		}
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == msg && e.TraceID == traceID && e.SpanID != "" {
			return true
		}
	}
	return false
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(b)
}
