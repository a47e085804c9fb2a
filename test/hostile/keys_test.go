package hostile

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/projects"
	"berth.dev/core/store/storetest"
	"berth.dev/test/internal/stack"
)

// The admin API's methods the key tests call by name.
const (
	getSessionMethod  = "/berth.admin.v1.SessionService/GetSession"
	keyPrefix         = "berth-key-v1."
	keyMethodDenied   = "project_key_method_denied"
	msgInvalidKey     = "invalid project key"
	suspendSessMethod = "/berth.admin.v1.SessionService/SuspendSession"
)

// keyMethods are the methods a project key may call (issue 31, item 2).
var keyMethods = map[string]bool{
	"/berth.admin.v1.SessionService/CreateSession": true,
	getSessionMethod: true,
	"/berth.admin.v1.SessionService/ListSessions":  true,
	"/berth.admin.v1.SessionService/DeleteSession": true,
	"/berth.admin.v1.TurnService/SubmitTurn":       true,
	"/berth.admin.v1.TurnService/GetTurn":          true,
	"/berth.admin.v1.TurnService/ListTurns":        true,
	"/berth.admin.v1.TurnService/StreamTurnOutput": true,
	"/berth.admin.v1.TurnService/CancelTurn":       true,
}

// credential is one kind of bearer token the hostile cases are repeated
// with: the administrator's token or a project key.
type credential struct {
	name string
	ctx  context.Context // carries the credential
	// unknown is a well-formed token of this kind Core does not know;
	// prefix starts every token of the kind.
	unknown, prefix string
	// read is a unary method the credential may call, and readRequest a
	// valid request of it (malformed bodies are sent to it).
	read        string
	readRequest proto.Message
	// served is a call the credential is served.
	served func(ctx context.Context) error
	admin  bool
}

// may reports whether the credential may call method.
func (c credential) may(method string) bool { return c.admin || keyMethods[method] }

// adminCredential is the operator's admin token of Core (authed carries
// it).
func adminCredential(t *testing.T, cc *grpc.ClientConn, authed context.Context) credential {
	t.Helper()
	return credential{
		name: "admin token", ctx: authed, admin: true,
		unknown: "berth-admin-v1." + strings.Repeat("A", 43), prefix: "",
		read: getInstallationMethod, readRequest: &adminv1.GetInstallationRequest{Name: "installation"},
		served: func(ctx context.Context) error {
			_, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(ctx, &adminv1.GetInstallationRequest{Name: "installation"})
			return err
		},
	}
}

// keyCredential creates, as the operator (authed), a tenant, a project
// and a key of it, and returns the key as a credential.
func keyCredential(t *testing.T, cc *grpc.ClientConn, authed context.Context) credential {
	t.Helper()
	k := newKey(t, cc, authed, nil)
	return credential{
		name: "project key", ctx: k.ctx(context.Background()),
		unknown: unknownKey(t), prefix: keyPrefix,
		read: getSessionMethod, readRequest: &adminv1.GetSessionRequest{Name: "sessions/" + uuid.NewString()},
		served: func(ctx context.Context) error {
			_, err := adminv1.NewSessionServiceClient(cc).ListSessions(ctx, &adminv1.ListSessionsRequest{})
			return err
		},
	}
}

// key is a project key made through the admin API.
type key struct {
	name, token string
}

// ctx returns parent carrying the key.
func (k key) ctx(parent context.Context) context.Context {
	return metadata.AppendToOutgoingContext(parent, "authorization", "Bearer "+k.token)
}

// newKey creates a tenant, a project and a key of it (expiring at
// expire, when set) as the operator.
func newKey(t *testing.T, cc *grpc.ClientConn, authed context.Context, expire *time.Time) key {
	t.Helper()
	api := adminv1.NewProjectServiceClient(cc)
	tn, err := api.CreateTenant(authed, &adminv1.CreateTenantRequest{RequestId: uuid.NewString(), Tenant: &adminv1.Tenant{DisplayName: "t-" + uuid.NewString()[:8]}})
	if err != nil {
		t.Fatalf("CreateTenant: %v", err)
	}
	p, err := api.CreateProject(authed, &adminv1.CreateProjectRequest{Parent: tn.GetTenant().GetName(), RequestId: uuid.NewString(), Project: &adminv1.Project{DisplayName: "p"}})
	if err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	pk := &adminv1.ProjectKey{}
	if expire != nil {
		pk.ExpireTime = timestamppb.New(*expire)
	}
	resp, err := api.CreateProjectKey(authed, &adminv1.CreateProjectKeyRequest{Parent: p.GetProject().GetName(), RequestId: uuid.NewString(), Key: pk})
	if err != nil {
		t.Fatalf("CreateProjectKey: %v", err)
	}
	return key{name: resp.GetKey().GetName(), token: resp.GetToken()}
}

// unknownKey is a token of a key's exact form whose id Core never made.
func unknownKey(t *testing.T) string {
	t.Helper()
	tok, _, _, err := projects.NewKeyToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok.Reveal()
}

// wrongSecret is token with another well-formed secret.
func wrongSecret(t *testing.T, token string) string {
	t.Helper()
	other := unknownKey(t)
	return token[:strings.LastIndex(token, ".")] + other[strings.LastIndex(other, "."):]
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHostileProjectKeys: project keys Core must refuse, each
// UNAUTHENTICATED with the admin API's fixed answer and, for every key
// that is not live (an unknown id, a wrong secret, a revoked key, an
// expired key, a 10,000-character token), the very same answer, so a
// caller cannot tell which it held; two authorization headers are
// refused; a key calling a method it may not call with a body past the
// message bound is PERMISSION_DENIED from the headers alone (had grpc-go
// started on the message it would have been RESOURCE_EXHAUSTED), and
// Core's memory around
// those calls is reported; 10,000 bad key tokens are all refused (the
// time reported); live keys and the operator are served throughout and
// no token reaches Core's log.
func TestHostileProjectKeys(t *testing.T) {
	core := stack.StartCore(t, storetest.NewDatabase(t), stack.CoreStateDir(t), true)
	cc, authed := core.AdminClient(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("berth-core log:\n%s", core.Logs())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sessions := adminv1.NewSessionServiceClient(cc)
	list := func(ctx context.Context) error {
		_, err := sessions.ListSessions(ctx, &adminv1.ListSessionsRequest{})
		return err
	}
	live := newKey(t, cc, authed, nil)
	if err := list(live.ctx(ctx)); err != nil {
		t.Fatalf("a live key: %v", err)
	}

	// Keys that are not live: one answer for all.
	revoked := newKey(t, cc, authed, nil)
	if err := list(revoked.ctx(ctx)); err != nil {
		t.Fatal(err)
	}
	revokedAt := time.Now()
	if _, err := adminv1.NewProjectServiceClient(cc).RevokeProjectKey(authed, &adminv1.RevokeProjectKeyRequest{Name: revoked.name}); err != nil {
		t.Fatal(err)
	}
	stack.WaitFor(t, 5*time.Second, "the revoked key refused", func() bool { return status.Code(list(revoked.ctx(ctx))) == codes.Unauthenticated })
	t.Logf("revoked key refused %v after RevokeProjectKey", time.Since(revokedAt).Round(10*time.Millisecond))
	expireAt := time.Now().Add(2 * time.Second)
	expiring := newKey(t, cc, authed, &expireAt)
	if err := list(expiring.ctx(ctx)); err != nil {
		t.Fatalf("a key before its expire_time: %v", err)
	}
	stack.WaitFor(t, 10*time.Second, "the expired key refused", func() bool { return status.Code(list(expiring.ctx(ctx))) == codes.Unauthenticated })
	t.Logf("expired key refused %v after its expire_time", time.Since(expireAt).Round(10*time.Millisecond))
	long := keyPrefix + strings.Repeat("A", 10_000-len(keyPrefix))
	var first *status.Status
	for name, token := range map[string]string{
		"unknown key id":          unknownKey(t),
		"wrong secret":            wrongSecret(t, live.token),
		"revoked key":             revoked.token,
		"expired key":             expiring.token,
		"10,000-character token":  long,
		"truncated key":           live.token[:len(live.token)-1],
		"key with a trailing dot": live.token + ".",
	} {
		err := list(key{token: token}.ctx(ctx))
		wantStatus(t, name, err, codes.Unauthenticated, "unauthenticated", "")
		s := status.Convert(err)
		if s.Message() != msgInvalidKey || strings.Contains(s.Message(), token) {
			t.Errorf("%s: message %q", name, s.Message())
		}
		if first == nil {
			first = s
		} else if !proto.Equal(first.Proto(), s.Proto()) {
			t.Errorf("%s answered %v, another refused key %v", name, s.Proto(), first.Proto())
		}
	}
	// A revoked key is refused on a method it may not call just the same
	// (authentication before the method).
	wantStatus(t, "revoked key, denied method", invokeRaw(revoked.ctx(ctx), cc, previewMethod, nil), codes.Unauthenticated, "unauthenticated", "")

	// Two authorization headers: refused, whichever they are.
	for name, pair := range map[string][2]string{
		"the same key twice":   {live.token, live.token},
		"a key and the admin":  {live.token, core.AdminToken(t)},
		"the admin and a key":  {core.AdminToken(t), live.token},
		"a key and an unknown": {live.token, unknownKey(t)},
	} {
		two := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+pair[0], "authorization", "Bearer "+pair[1])
		wantStatus(t, "two authorization headers: "+name, list(two), codes.Unauthenticated, "unauthenticated", "")
	}

	// A body past the message bound to a method a key may not call is
	// PERMISSION_DENIED: the refusal comes from the headers, since had
	// grpc-go started on the message it would have been RESOURCE_EXHAUSTED
	// (its size check on the message's length prefix, as the
	// administrator's identical call shows). Core's memory is reported
	// around 50 such calls, 10 at a time.
	big, err := grpc.NewClient(core.AdminAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	body := appendBytesField(nil, 1, []byte(strings.Repeat("x", 4<<20)))
	wantStatus(t, "key, 4 MiB body, denied method", invokeRaw(live.ctx(ctx), big, suspendSessMethod, body), codes.PermissionDenied, keyMethodDenied, "")
	if err := invokeRaw(authed, big, suspendSessMethod, body); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("the administrator's 4 MiB body: %v, want RESOURCE_EXHAUSTED (grpc-go's size check)", err)
	} else {
		t.Logf("the administrator's 4 MiB body: %v %v", err, status.Convert(err).Details())
	}
	pid := core.Cmd.Process.Pid
	// burst sends the body 50 times, 10 at a time, with ctx's credential
	// while sampling Core's VmRSS every 50 ms, and reports the answers.
	burst := func(label string, ctx context.Context) map[string]int {
		idle, _, _ := vmRSS(pid)
		var (
			mu      sync.Mutex
			answers = map[string]int{}
			peak    atomic.Int64
			stop    = make(chan struct{})
			sampled sync.WaitGroup
			wg      sync.WaitGroup
		)
		sampled.Go(func() {
			for {
				if rss, _, err := vmRSS(pid); err == nil && rss > peak.Load() {
					peak.Store(rss)
				}
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
		began := time.Now()
		for range 10 {
			wg.Go(func() {
				for range 5 {
					err := invokeRaw(ctx, big, suspendSessMethod, body)
					mu.Lock()
					answers[status.Code(err).String()+" "+stack.AdminReason(err)]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		took := time.Since(began)
		close(stop)
		sampled.Wait()
		after, hwm, _ := vmRSS(pid)
		t.Logf("MEASURE 50 x 4 MiB bodies to SuspendSession with %s: %v in %v; Core VmRSS before %.0f MB, peak %.0f MB, after %.0f MB, VmHWM %.0f MB",
			label, answers, took.Round(time.Millisecond), mb(idle), mb(peak.Load()), mb(after), mb(hwm))
		return answers
	}
	if got := burst("a project key", live.ctx(ctx)); got["PermissionDenied "+keyMethodDenied] != 50 {
		t.Errorf("the key's 4 MiB bodies: %v, want 50 PERMISSION_DENIED", got)
	}
	// For comparison only: the administrator may call the method, so its
	// messages reach grpc-go's size check.
	burst("the admin token (reference: grpc-go's size check)", authed)

	// 10,000 bad key tokens, 16 callers at once: unknown ids and wrong
	// secrets of the live key, each refused.
	const bad = 10_000
	tokens := make([]string, bad)
	for i := range tokens {
		if i%2 == 0 {
			tokens[i] = unknownKey(t)
		} else {
			tokens[i] = wrongSecret(t, live.token)
		}
	}
	var refused, other atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	began := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= bad {
					return
				}
				err := list(key{token: tokens[i]}.ctx(ctx))
				if s := status.Convert(err); s.Code() == codes.Unauthenticated && s.Message() == msgInvalidKey {
					refused.Add(1)
				} else {
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("MEASURE %d bad key tokens: %d refused UNAUTHENTICATED, %d otherwise, in %v (%.0f calls/s)",
		bad, refused.Load(), other.Load(), time.Since(began).Round(time.Millisecond), float64(bad)/time.Since(began).Seconds())
	if refused.Load() != bad {
		t.Errorf("%d of %d bad key tokens refused", refused.Load(), bad)
	}

	// The live key and the operator are still served; no token, nor any
	// key token's secret, is in Core's log.
	if err := list(live.ctx(ctx)); err != nil {
		t.Fatalf("the live key after the attacks: %v", err)
	}
	if _, err := adminv1.NewInstallationServiceClient(cc).GetInstallation(authed, &adminv1.GetInstallationRequest{Name: "installation"}); err != nil {
		t.Fatalf("the operator after the attacks: %v", err)
	}
	logs := core.Logs()
	if strings.Contains(logs, keyPrefix) {
		t.Error("Core's log holds a key token")
	}
	for _, k := range []key{live, revoked, expiring} {
		if strings.Contains(logs, k.token[strings.LastIndex(k.token, ".")+1:]) {
			t.Error("Core's log holds a key's secret")
		}
	}
}
