package projectadmin_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs/errdefstest"

	"berth.dev/core/admin"
	"berth.dev/core/admin/admintest"
	"berth.dev/core/projects"
)

// TestGRPCProjectKeys: a key is created with its token shown once (a
// retry returns it without), listed without any token, revoked for good,
// and shows EXPIRED past its expiry on the database clock; a key named
// under another project or tenant is NOT_FOUND, and bad input is
// INVALID_ARGUMENT naming the field.
func TestGRPCProjectKeys(t *testing.T) {
	f := newFixture(t)
	tn := f.tenant(t, "team")
	p := f.project(t, tn.GetName(), "agents")
	other := f.project(t, tn.GetName(), "other")

	req := &adminv1.CreateProjectKeyRequest{Parent: p.GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{DisplayName: "ci"}}
	created, err := f.CreateProjectKey(f.ctx, req)
	errdefstest.Must(t, err)
	k, token := created.GetKey(), created.GetToken()
	if !strings.HasPrefix(k.GetName(), p.GetName()+"/keys/") || k.GetState() != adminv1.ProjectKey_STATE_ACTIVE || k.GetDisplayName() != "ci" {
		t.Fatalf("created %v", k)
	}
	id, ok := projects.ParseKeyToken(token)
	if !ok || !strings.HasSuffix(k.GetName(), "/keys/"+id.String()) {
		t.Fatal("the token is not of the key's form or id")
	}
	again, err := f.CreateProjectKey(f.ctx, req)
	errdefstest.Must(t, err)
	if again.GetToken() != "" || again.GetKey().GetName() != k.GetName() {
		t.Fatalf("retry: token shown again (%v) or another key", again.GetToken() != "")
	}
	req2 := &adminv1.CreateProjectKeyRequest{Parent: p.GetName(), RequestId: req.GetRequestId(), Key: &adminv1.ProjectKey{DisplayName: "other"}}
	_, err = f.CreateProjectKey(f.ctx, req2)
	admintest.WantStatus(t, err, codes.AlreadyExists, admin.ReasonExists)

	// Bad input.
	past := timestamppb.New(time.Now().Add(-time.Hour))
	for field, r := range map[string]*adminv1.CreateProjectKeyRequest{
		"key.expire_time": {Parent: p.GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{ExpireTime: past}},
		"key.state":       {Parent: p.GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{State: adminv1.ProjectKey_STATE_REVOKED}},
		"key.name":        {Parent: p.GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{Name: "x"}},
		"parent":          {Parent: "tenants/x", RequestId: uuid.NewString()},
		"request_id":      {Parent: p.GetName()},
	} {
		_, err := f.CreateProjectKey(f.ctx, r)
		admintest.WantInvalidField(t, err, field)
	}
	misparented := admin.ProjectName.Format(uuid.NewString(), strings.TrimPrefix(p.GetName(), tn.GetName()+"/projects/"))
	_, err = f.CreateProjectKey(f.ctx, &adminv1.CreateProjectKeyRequest{Parent: misparented, RequestId: uuid.NewString()})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)

	// An expiring key, and its expiry passed on the database clock.
	soon := timestamppb.New(time.Now().Add(time.Hour))
	exp, err := f.CreateProjectKey(f.ctx, &adminv1.CreateProjectKeyRequest{Parent: p.GetName(), RequestId: uuid.NewString(), Key: &adminv1.ProjectKey{ExpireTime: soon}})
	errdefstest.Must(t, err)
	if !exp.GetKey().GetExpireTime().AsTime().Equal(soon.AsTime().Truncate(time.Microsecond)) {
		t.Fatalf("expire_time %v, want %v", exp.GetKey().GetExpireTime().AsTime(), soon.AsTime())
	}
	expID := exp.GetKey().GetName()[strings.LastIndex(exp.GetKey().GetName(), "/")+1:]
	_, err = f.st.Pool().Exec(f.plain, `UPDATE project_keys SET created_at = now() - interval '2 hours', expire_at = now() - interval '1 hour' WHERE id = $1`, expID)
	errdefstest.Must(t, err)

	// Revocation: by another project's name NOT_FOUND; by its own, final.
	keyID := strings.TrimPrefix(k.GetName(), p.GetName()+"/keys/")
	_, err = f.RevokeProjectKey(f.ctx, &adminv1.RevokeProjectKeyRequest{Name: other.GetName() + "/keys/" + keyID})
	admintest.WantStatus(t, err, codes.NotFound, admin.ReasonNotFound)
	revoked, err := f.RevokeProjectKey(f.ctx, &adminv1.RevokeProjectKeyRequest{Name: k.GetName()})
	errdefstest.Must(t, err)
	if revoked.GetKey().GetState() != adminv1.ProjectKey_STATE_REVOKED || revoked.GetKey().GetRevokeTime() == nil {
		t.Fatalf("revoked %v", revoked.GetKey())
	}

	var states []adminv1.ProjectKey_State
	token2 := ""
	for {
		page, err := f.ListProjectKeys(f.ctx, &adminv1.ListProjectKeysRequest{Parent: p.GetName(), PageSize: 1, PageToken: token2})
		errdefstest.Must(t, err)
		for _, key := range page.GetKeys() {
			states = append(states, key.GetState())
		}
		if token2 = page.GetNextPageToken(); token2 == "" {
			break
		}
	}
	// The expiring key's creation was moved back: it lists first.
	if len(states) != 2 || states[0] != adminv1.ProjectKey_STATE_EXPIRED || states[1] != adminv1.ProjectKey_STATE_REVOKED {
		t.Fatalf("listed states %v", states)
	}
	list, err := f.ListProjectKeys(f.ctx, &adminv1.ListProjectKeysRequest{Parent: other.GetName()})
	errdefstest.Must(t, err)
	if len(list.GetKeys()) != 0 {
		t.Fatal("another project lists this project's keys")
	}
}
