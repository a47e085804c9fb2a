package nodeadmin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"berth.dev/platform/nodetls"
	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/enrollment/enrollmenttest"
	"berth.dev/core/store"
)

// secretParts are the strings of a token text that must never appear
// outside the CreateEnrollmentToken response: the text and its secret.
func secretParts(text string) []string {
	parts := strings.Split(text, ".")
	return []string{text, parts[2]}
}

// wantNoSecret fails the test when msg (a response other than
// CreateEnrollmentToken's) or err carries any of the texts. It never
// prints what it found.
func wantNoSecret(t *testing.T, what string, msg proto.Message, err error, texts ...string) {
	t.Helper()
	var b []byte
	if msg != nil {
		var merr error
		if b, merr = proto.Marshal(msg); merr != nil {
			t.Fatalf("%s: marshal: %v", what, merr)
		}
	}
	if err != nil {
		b = append(b, err.Error()...)
	}
	for _, text := range texts {
		for _, s := range secretParts(text) {
			if bytes.Contains(b, []byte(s)) {
				t.Fatalf("%s carries enrollment token text", what)
			}
		}
	}
}

func TestGRPCRefusesUnauthenticated(t *testing.T) {
	f := enrollmenttest.New(t)
	c := serve(t, f)
	admintest.WantUnauthenticated(t, f.Ctx, c.token, func(ctx context.Context) []error {
		_, createErr := c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString()})
		_, nodesErr := c.ListNodes(ctx, &adminv1.ListNodesRequest{})
		_, tokensErr := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{})
		return []error{createErr, nodesErr, tokensErr}
	})
	if page := allTokens(t, f); len(page) != 0 {
		t.Fatalf("unauthenticated calls created %d tokens", len(page))
	}
}

func TestGRPCEnrollmentTokens(t *testing.T) {
	f := enrollmenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)

	// Create with ttl unset: one hour.
	req := uuid.NewString()
	created, err := c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: req})
	errdefstest.Must(t, err)
	text := created.GetTokenText()
	tok, err := nodetls.ParseToken(text)
	if err != nil {
		t.Fatalf("token_text does not parse: %v", err)
	}
	et := created.GetEnrollmentToken()
	if et.GetName() != "enrollmentTokens/"+tok.ID() || tok.CAFingerprint() != f.CA.Fingerprint() {
		t.Fatalf("token %s pins %s, want enrollmentTokens/%s pinning %s", et.GetName(), tok.CAFingerprint(), tok.ID(), f.CA.Fingerprint())
	}
	if !bytes.Equal(f.StoredSecretHash(t, tok.ID()), tok.SecretHash()) {
		t.Fatal("the stored secret hash is not the text's")
	}
	if et.GetState() != adminv1.EnrollmentToken_STATE_ACTIVE ||
		et.GetExpireTime().AsTime().Sub(et.GetCreateTime().AsTime()) != time.Hour ||
		et.GetUseTime() != nil || et.GetRevokeTime() != nil || et.GetNode() != "" {
		t.Fatalf("created token state %v, created %v, expires %v", et.GetState(), et.GetCreateTime(), et.GetExpireTime())
	}

	// A retry, with the default spelled out: the same token, new text.
	retried, err := c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: req, Ttl: durationpb.New(time.Hour)})
	errdefstest.Must(t, err)
	if retried.GetEnrollmentToken().GetName() != et.GetName() {
		t.Fatalf("retry made %s, want %s", retried.GetEnrollmentToken().GetName(), et.GetName())
	}
	if retried.GetTokenText() == text {
		t.Fatal("retry returned the earlier text")
	}
	newTok, err := nodetls.ParseToken(retried.GetTokenText())
	errdefstest.Must(t, err)
	if !bytes.Equal(f.StoredSecretHash(t, tok.ID()), newTok.SecretHash()) {
		t.Fatal("the retry's text is not what the store now checks")
	}
	texts := []string{text, retried.GetTokenText()}
	_, err = c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: req, Ttl: durationpb.New(2 * time.Hour)})
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)

	// Invalid requests name their field and create nothing.
	for name, r := range map[string]*adminv1.CreateEnrollmentTokenRequest{
		"missing request_id": {},
		"bad request_id":     {RequestId: "retry-1"},
		"zero ttl":           {RequestId: uuid.NewString(), Ttl: durationpb.New(0)},
		"short ttl":          {RequestId: uuid.NewString(), Ttl: durationpb.New(30 * time.Second)},
		"long ttl":           {RequestId: uuid.NewString(), Ttl: durationpb.New(8 * 24 * time.Hour)},
		"negative ttl":       {RequestId: uuid.NewString(), Ttl: durationpb.New(-time.Hour)},
		"malformed ttl":      {RequestId: uuid.NewString(), Ttl: &durationpb.Duration{Seconds: 3600, Nanos: -1}},
	} {
		_, err := c.CreateEnrollmentToken(ctx, r)
		field := "ttl"
		if strings.Contains(name, "request_id") {
			field = "request_id"
		}
		t.Run(name, func(t *testing.T) { admintest.WantInvalidField(t, err, field) })
	}

	// More tokens than a page; list them oldest first, without text.
	want := []string{et.GetName()}
	for range 4 {
		r, err := c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: uuid.NewString(), Ttl: durationpb.New(10 * time.Minute)})
		errdefstest.Must(t, err)
		want = append(want, r.GetEnrollmentToken().GetName())
		texts = append(texts, r.GetTokenText())
	}
	got, pages := admintest.Pages(t, func(token string) ([]*adminv1.EnrollmentToken, string, error) {
		resp, err := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: 2, PageToken: token})
		wantNoSecret(t, "ListEnrollmentTokens", resp, nil, texts...)
		return resp.GetEnrollmentTokens(), resp.GetNextPageToken(), err
	})
	if strings.Join(got, ",") != strings.Join(want, ",") || pages != 3 {
		t.Fatalf("listed %v in %d pages, want %v in 3", got, pages, want)
	}
	_, err = c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageToken: "bm90IGEgdG9rZW4"})
	admintest.WantInvalidField(t, err, "page_token")

	// Use one token, revoke another.
	enrolled, err := f.Enroll.Enroll(f.Ctx, retried.GetTokenText(), enrollmenttest.NewCSR(t), "node.test:7443")
	errdefstest.Must(t, err)
	revoked, err := c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: want[1]})
	errdefstest.Must(t, err)
	wantNoSecret(t, "RevokeEnrollmentToken", revoked, nil, texts...)
	if r := revoked.GetEnrollmentToken(); r.GetState() != adminv1.EnrollmentToken_STATE_REVOKED || r.GetRevokeTime() == nil {
		t.Fatalf("revoked token %v", r)
	}
	again, err := c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: want[1]})
	errdefstest.Must(t, err)
	if !proto.Equal(again.GetEnrollmentToken(), revoked.GetEnrollmentToken()) {
		t.Fatalf("revoking again changed the token: %v", again.GetEnrollmentToken())
	}
	_, err = c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: want[0]})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "enrollment_token_used")
	wantNoSecret(t, "refused revocation", nil, err, texts...)
	_, err = c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: req})
	admintest.WantStatus(t, err, codes.FailedPrecondition, "enrollment_token_spent")
	wantNoSecret(t, "refused retry", nil, err, texts...)
	_, err = c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: "enrollmentTokens/" + strings.Repeat("0", 32)})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	for _, bad := range []string{"", "enrollmentTokens/x", "nodes/" + uuid.NewString()} {
		_, err = c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
	}

	// Only the three active tokens by default; all five with show_inactive.
	active, err := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{})
	errdefstest.Must(t, err)
	all, err := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{ShowInactive: true})
	errdefstest.Must(t, err)
	wantNoSecret(t, "ListEnrollmentTokens", all, nil, texts...)
	if len(active.GetEnrollmentTokens()) != 3 || len(all.GetEnrollmentTokens()) != 5 {
		t.Fatalf("%d active and %d tokens, want 3 and 5", len(active.GetEnrollmentTokens()), len(all.GetEnrollmentTokens()))
	}
	used := all.GetEnrollmentTokens()[0]
	if used.GetState() != adminv1.EnrollmentToken_STATE_USED || used.GetUseTime() == nil ||
		used.GetNode() != "nodes/"+enrolled.NodeID.String() {
		t.Fatalf("used token %v, want used by nodes/%s", used, enrolled.NodeID)
	}
	// The node names its token; no node call carries text either.
	node, err := c.GetNode(ctx, &adminv1.GetNodeRequest{Name: used.GetNode()})
	errdefstest.Must(t, err)
	wantNoSecret(t, "GetNode", node, nil, texts...)
	if node.GetNode().GetEnrollmentToken() != used.GetName() {
		t.Fatalf("node's enrollment_token %q, want %q", node.GetNode().GetEnrollmentToken(), used.GetName())
	}
}

func TestGRPCNodes(t *testing.T) {
	f := enrollmenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)
	const total = 5
	var names []string
	for range total {
		id, _ := f.EnrollNode(t)
		names = append(names, "nodes/"+id.String())
	}

	resp, err := c.GetNode(ctx, &adminv1.GetNodeRequest{Name: names[0]})
	errdefstest.Must(t, err)
	n := resp.GetNode()
	if n.GetName() != names[0] || "nodes/"+n.GetId() != names[0] || n.GetAdvertiseAddress() != "node.test:7443" ||
		n.GetState() != adminv1.Node_STATE_ENROLLED || n.GetEnrollTime() == nil ||
		!strings.HasPrefix(n.GetEnrollmentToken(), "enrollmentTokens/") {
		t.Fatalf("node %v", n)
	}
	// Nothing observed yet, nothing reported: only what the database
	// knows (it holds nothing; no deployment, so no limits nor reason).
	if c := n.GetCapacity(); n.GetPresence() != nil || n.GetReadiness() != nil || c.GetCpuMillis() != 0 || c.GetMemoryBytes() != 0 ||
		c.GetActive() != 0 || c.GetMaxActive() != 0 || c.GetNoRoomReason() != "" {
		t.Fatalf("node reports presence %v, readiness %v, capacity %v", n.GetPresence(), n.GetReadiness(), n.GetCapacity())
	}

	type call func(context.Context, string) (*adminv1.Node, error)
	enable := func(ctx context.Context, name string) (*adminv1.Node, error) {
		r, err := c.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: name})
		return r.GetNode(), err
	}
	retire := func(ctx context.Context, name string) (*adminv1.Node, error) {
		r, err := c.RetireNode(ctx, &adminv1.RetireNodeRequest{Name: name})
		return r.GetNode(), err
	}
	remove := func(ctx context.Context, name string) (*adminv1.Node, error) {
		r, err := c.RemoveNode(ctx, &adminv1.RemoveNodeRequest{Name: name})
		return r.GetNode(), err
	}
	for _, st := range []struct {
		what string
		call call
		want adminv1.Node_State // STATE_UNSPECIFIED: refused
	}{
		{"enable enrolled", enable, adminv1.Node_STATE_ENABLED},
		{"enable enabled", enable, adminv1.Node_STATE_ENABLED},
		{"remove enabled", remove, adminv1.Node_STATE_UNSPECIFIED},
		{"retire enabled", retire, adminv1.Node_STATE_RETIRED},
		{"retire retired", retire, adminv1.Node_STATE_RETIRED},
		{"remove retired", remove, adminv1.Node_STATE_REMOVED},
		{"remove removed", remove, adminv1.Node_STATE_REMOVED},
		{"enable removed", enable, adminv1.Node_STATE_UNSPECIFIED},
		{"retire removed", retire, adminv1.Node_STATE_UNSPECIFIED},
	} {
		got, err := st.call(ctx, names[0])
		if st.want == adminv1.Node_STATE_UNSPECIFIED {
			// Each refusal names itself and says what to do.
			reason, message := admin.Reason("node_removed"), "node is removed: enroll the host again with a new enrollment token"
			if st.what == "remove enabled" {
				reason, message = "node_enabled", "node is enabled: retire it first"
			}
			if s := admintest.WantStatus(t, err, codes.FailedPrecondition, reason); s.Message() != message {
				t.Fatalf("%s: message %q", st.what, s.Message())
			}
			continue
		}
		errdefstest.Must(t, err)
		if got.GetState() != st.want || got.GetName() != names[0] {
			t.Fatalf("%s: node %s is %v, want %v", st.what, got.GetName(), got.GetState(), st.want)
		}
	}
	// Each change (not the repeats, not the refusals) is a decision by
	// the administrator, read back from the trail.
	far := time.Now().Add(time.Hour)
	events, err := f.St.ListAuditEvents(f.Ctx, store.AuditFilter{ActionPrefix: "node.", End: &far}, store.AuditCursor{}, 10)
	errdefstest.Must(t, err)
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
		if e.Kind != store.AuditDecision || e.Actor() != "admin" || e.RequestID == uuid.Nil || e.Resource != names[0] {
			t.Fatalf("node event %+v", e)
		}
	}
	if strings.Join(actions, " ") != "node.enable node.retire node.remove" {
		t.Fatalf("node events %q", actions)
	}
	for _, fn := range []call{enable, retire, remove} {
		_, err := fn(ctx, "nodes/"+uuid.NewString())
		admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
		_, err = fn(ctx, "nodes/node-1")
		admintest.WantInvalidField(t, err, "name")
	}
	_, err = c.GetNode(ctx, &adminv1.GetNodeRequest{})
	admintest.WantInvalidField(t, err, "name")

	// More nodes than a page, in enrollment order; the removed one only
	// when asked for.
	admintest.WantListed(t, func(showRemoved bool, token string) ([]*adminv1.Node, string, error) {
		resp, err := c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 2, PageToken: token, ShowRemoved: showRemoved})
		return resp.GetNodes(), resp.GetNextPageToken(), err
	}, names, names[1:], "removed")
	_, err = c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: -1})
	admintest.WantInvalidField(t, err, "page_size")
}

// The status of every refusal is the admin API's fixed form.
func TestGRPCErrorsAreFixed(t *testing.T) {
	f := enrollmenttest.New(t)
	c := serve(t, f)
	_, err := c.GetNode(c.authed(f.Ctx), &adminv1.GetNodeRequest{Name: "nodes/" + uuid.NewString()})
	s, _ := status.FromError(err)
	if s.Message() != "not found" {
		t.Errorf("message %q, want the fixed \"not found\"", s.Message())
	}
}

// The names, request ids, page sizes and page tokens of every call are
// the adapter's to check: each refusal names its field, and a refused
// creation stores nothing.
func TestGRPCValidatesRequests(t *testing.T) {
	f := enrollmenttest.New(t)
	c := serve(t, f)
	ctx := c.authed(f.Ctx)

	for name, id := range map[string]string{
		"empty":      "",
		"not a uuid": "request-1",
		"upper case": strings.ToUpper(uuid.NewString()),
		"braces":     "{" + uuid.NewString() + "}",
	} {
		_, err := c.CreateEnrollmentToken(ctx, &adminv1.CreateEnrollmentTokenRequest{RequestId: id})
		if err == nil {
			t.Fatalf("request_id %s accepted", name)
		}
		admintest.WantInvalidField(t, err, "request_id")
	}
	if page := allTokens(t, f); len(page) != 0 {
		t.Fatalf("%d tokens stored by refused requests", len(page))
	}

	id, _ := f.EnrollNode(t)
	for _, bad := range []string{"", "nodes/", "nodes/node-1", "node/" + id.String(), "nodes/" + id.String() + "/x", "nodes/" + uuid.Nil.String()[:35]} {
		_, err := c.GetNode(ctx, &adminv1.GetNodeRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
	}
	_, err := c.EnableNode(ctx, &adminv1.EnableNodeRequest{Name: "nodes/not-a-node"})
	admintest.WantInvalidField(t, err, "name")

	issued := f.Issue(t, time.Hour)
	for _, bad := range []string{"", "enrollmentTokens/" + strings.Repeat("AB", 16), "nodes/" + uuid.NewString(), "enrollmentTokens/" + issued.Token.ID + "/x"} {
		_, err := c.RevokeEnrollmentToken(ctx, &adminv1.RevokeEnrollmentTokenRequest{Name: bad})
		admintest.WantInvalidField(t, err, "name")
	}

	// Page tokens belong to one listing: one method, one filter.
	f.EnrollNode(t)
	nodePage, err := c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 1, ShowRemoved: true})
	errdefstest.Must(t, err)
	if nodePage.GetNextPageToken() == "" {
		t.Fatal("no next page of nodes")
	}
	_, err = c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 1, PageToken: nodePage.GetNextPageToken()})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: -5})
	admintest.WantInvalidField(t, err, "page_size")

	// Two tokens are active (the enrolled nodes' are used): a next page.
	f.Issue(t, time.Hour)
	tokenPage, err := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: 1})
	errdefstest.Must(t, err)
	next := tokenPage.GetNextPageToken()
	if next == "" {
		t.Fatal("no next page of enrollment tokens")
	}
	_, err = c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: 1, PageToken: next, ShowInactive: true})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListNodes(ctx, &adminv1.ListNodesRequest{PageSize: 1, PageToken: next})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: 1, PageToken: next[:len(next)-2]})
	admintest.WantInvalidField(t, err, "page_token")
	_, err = c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: -1})
	admintest.WantInvalidField(t, err, "page_size")
	// The token itself is good: the listing goes on with it.
	rest, err := c.ListEnrollmentTokens(ctx, &adminv1.ListEnrollmentTokensRequest{PageSize: 1, PageToken: next})
	errdefstest.Must(t, err)
	if len(rest.GetEnrollmentTokens()) != 1 || rest.GetNextPageToken() != "" ||
		rest.GetEnrollmentTokens()[0].GetName() == tokenPage.GetEnrollmentTokens()[0].GetName() {
		t.Fatalf("second page %v after %v", rest.GetEnrollmentTokens(), tokenPage.GetEnrollmentTokens())
	}
}
