package admin

import (
	"context"

	"github.com/google/uuid"
)

// RequestIDHeader is the response header that returns a call's request
// id: the request's own request_id when it has one, else one Core minted
// for the call. Audit events of the call carry the same id.
const RequestIDHeader = "berth-request-id"

type requestIDKey struct{}

// withRequestID returns ctx carrying the call's request id.
func withRequestID(ctx context.Context, id uuid.UUID) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestIDFrom returns the request id of the call of ctx (uuid.Nil
// outside an admin call).
func RequestIDFrom(ctx context.Context) uuid.UUID {
	id, _ := ctx.Value(requestIDKey{}).(uuid.UUID)
	return id
}
