package nodeadmin

import (
	"math"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/enrollment"
	"berth.dev/core/nodes"
	"berth.dev/core/store"
)

// abandonmentProto is the API form of a recorded abandonment (nil: none):
// Berth names and counts only, never the native identities the record
// keeps.
func abandonmentProto(ab *store.NodeAbandonment) *adminv1.NodeAbandonment {
	if ab == nil {
		return nil
	}
	out := &adminv1.NodeAbandonment{
		BackendFingerprint: ab.BackendFingerprint,
		AbandonTime:        admin.Timestamp(&ab.AbandonedAt),
	}
	for _, a := range ab.Allocations {
		out.Allocations = append(out.Allocations, &adminv1.AbandonedAllocation{
			Allocation:   admin.AllocationName.Format(a.AllocationID.String()),
			Session:      admin.SessionName.Format(a.SessionID.String()),
			Snapshots:    clamp32(int64(len(a.Snapshots))),
			Incarnations: clamp32(int64(len(a.Computes))),
		})
	}
	for _, r := range ab.Reservations {
		out.Reservations = append(out.Reservations, admin.SessionName.Format(r.SessionID.String()))
	}
	return out
}

// requestID reads CreateEnrollmentTokenRequest.request_id: a required
// canonical UUID (admin.ValidateRequestID).
func requestID(s string) (uuid.UUID, error) {
	if err := admin.ValidateRequestID("request_id", s); err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(s)
	if err != nil { // ValidateRequestID accepted it: unreachable
		return uuid.Nil, errdefs.Invalid("request_id", "must be a canonical UUID")
	}
	return id, nil
}

// requestTTL reads CreateEnrollmentTokenRequest.ttl: unset is
// enrollment.DefaultTokenTTL; a set value goes to the logic as it is,
// which checks its bounds (so an explicit zero is refused, not
// defaulted).
func requestTTL(d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return enrollment.DefaultTokenTTL, nil
	}
	if d.CheckValid() != nil {
		return 0, errdefs.Invalid("ttl", "not a valid duration")
	}
	return d.AsDuration(), nil
}

// tokenState is the API state of tok as read (expiry by the database
// clock at the read): used, revoked unused, expired unused, or active.
func tokenState(tok store.EnrollmentToken) adminv1.EnrollmentToken_State {
	switch {
	case tok.UsedAt != nil:
		return adminv1.EnrollmentToken_STATE_USED
	case tok.RevokedAt != nil:
		return adminv1.EnrollmentToken_STATE_REVOKED
	case tok.Expired:
		return adminv1.EnrollmentToken_STATE_EXPIRED
	}
	return adminv1.EnrollmentToken_STATE_ACTIVE
}

// tokenProto is the API form of a token record; the record holds no text
// or secret hash, so neither can appear here.
func tokenProto(tok store.EnrollmentToken) *adminv1.EnrollmentToken {
	out := &adminv1.EnrollmentToken{
		Name:       admin.EnrollmentTokenName.Format(tok.ID),
		State:      tokenState(tok),
		CreateTime: admin.Timestamp(&tok.CreatedAt),
		ExpireTime: admin.Timestamp(&tok.ExpiresAt),
		UseTime:    admin.Timestamp(tok.UsedAt),
		RevokeTime: admin.Timestamp(tok.RevokedAt),
	}
	if tok.NodeID != nil {
		out.Node = admin.NodeName.Format(tok.NodeID.String())
	}
	return out
}

// nodeProto is the API form of a node, with presence, readiness and the
// reported capacity (l, when known) from Core's node connections, and
// always what it holds (active, retained) and, once a deployment is
// committed, its limits (max_active, max_retained) and, with a report,
// why it has no room for one more sandbox (nodes.NoRoom).
func nodeProto(n nodes.Node, l LiveState, known bool) *adminv1.Node {
	out := &adminv1.Node{
		Name:             admin.NodeName.Format(n.ID.String()),
		Id:               n.ID.String(),
		AdvertiseAddress: n.AdvertiseAddress,
		State:            adminv1.Node_State(admin.StateValue(adminv1.Node_State_value, string(n.State))),
		EnrollTime:       admin.Timestamp(&n.CreatedAt),
	}
	if n.EnrollmentTokenID != "" {
		out.EnrollmentToken = admin.EnrollmentTokenName.Format(n.EnrollmentTokenID)
	}
	out.BackendFingerprint = n.BackendFingerprint
	if known {
		out.Presence = &adminv1.Presence{Connected: l.Connected, LastReportTime: admin.Timestamp(&l.LastReport)}
		if !l.CheckTime.IsZero() {
			out.Readiness = &adminv1.Readiness{
				Generation: l.Generation, Ready: l.Ready, DiagnosticCode: l.DiagnosticCode,
				CheckTime: admin.Timestamp(&l.CheckTime),
			}
			out.Capacity = &adminv1.Capacity{
				CpuMillis: l.CPUMillis, MemoryBytes: l.MemoryBytes, DiskFreeBytes: l.DiskFreeBytes,
				CreationReceiptsHeld: clamp32(l.CreationReceiptsHeld),
			}
		}
	}
	// What the node holds is the database's, known without a connection;
	// the limits are the committed generation's.
	if out.Capacity == nil {
		out.Capacity = &adminv1.Capacity{}
	}
	c := out.Capacity
	c.Active, c.Retained = clamp32(n.Load.Active), clamp32(n.Load.Retained)
	if n.Limits != nil {
		c.MaxActive, c.MaxRetained = n.Limits.MaxActive, n.Limits.MaxRetained
		if out.Readiness != nil {
			c.NoRoomReason = nodes.NoRoom(*n.Limits, n.Load, c.GetCpuMillis(), c.GetMemoryBytes(), c.GetDiskFreeBytes())
		}
	}
	return out
}

// clamp32 fits a count into the API's int32.
func clamp32(v int64) int32 { return int32(min(v, math.MaxInt32)) }
