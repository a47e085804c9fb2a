package admin

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"berth.dev/platform/errgrpc"
	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/projects"
)

// KeyAuthenticator authenticates project keys (core/projects' KeyIndex):
// Check from memory as a call's headers arrive, Verify against the
// database before its handler runs.
type KeyAuthenticator interface {
	Check(token string) (projects.Key, bool)
	Verify(ctx context.Context, id uuid.UUID) (projects.Key, error)
}

// keyMethods are the only methods a project key may call: its project's
// Sessions (forks included: the children stay in the project), their
// Turns and their files. Everything else (suspension, allocations,
// nodes, the deployment, the installation, projects and keys) is the
// administrator's; a key calling it is PERMISSION_DENIED from the method
// name alone, before the body is read, whatever names it carries.
var keyMethods = map[string]bool{
	adminv1.SessionService_CreateSession_FullMethodName: true,
	adminv1.SessionService_GetSession_FullMethodName:    true,
	adminv1.SessionService_ListSessions_FullMethodName:  true,
	adminv1.SessionService_DeleteSession_FullMethodName: true,
	adminv1.SessionService_ForkSession_FullMethodName:   true,
	adminv1.TurnService_SubmitTurn_FullMethodName:       true,
	adminv1.TurnService_GetTurn_FullMethodName:          true,
	adminv1.TurnService_ListTurns_FullMethodName:        true,
	adminv1.TurnService_StreamTurnOutput_FullMethodName: true,
	adminv1.TurnService_CancelTurn_FullMethodName:       true,
	adminv1.FileService_UploadFiles_FullMethodName:      true,
	adminv1.FileService_DownloadFiles_FullMethodName:    true,
}

// ReasonKeyMethodDenied refuses a project key a method it may not call.
const ReasonKeyMethodDenied Reason = "project_key_method_denied"

// The fixed messages of refused project keys.
const (
	msgInvalidKey      = "invalid project key"
	msgKeyMethodDenied = "project keys may call only Session, Turn and File methods of their own project: use the administrator token"
)

// ErrPermissionDenied is the class a client decodes a PERMISSION_DENIED
// answer to: a credential that authenticated but may not make the call.
var ErrPermissionDenied = errors.New("permission denied")

var permissionDeniedRow = errgrpc.Row{Class: ErrPermissionDenied, Code: codes.PermissionDenied, Reason: string(ReasonKeyMethodDenied), Message: msgKeyMethodDenied}

// keyMethodDenied is the tap's answer to a key calling a method outside
// keyMethods.
func keyMethodDenied() error { return codec.Err(codec.Build(permissionDeniedRow, nil)) }

// verify replaces the tap's provisional key principal of ctx with the one
// the database verifies now; the administrator's context passes as it
// is. A key the database refuses is UNAUTHENTICATED; a failed read is the
// store's error in the admin API's form (database_unavailable).
func (a authenticator) verify(ctx context.Context) (context.Context, error) {
	p := PrincipalFrom(ctx)
	if p.key.ID == uuid.Nil {
		return ctx, nil
	}
	if a.keys == nil {
		return ctx, unauthenticated(msgInvalidKey)
	}
	k, err := a.keys.Verify(ctx, p.key.ID)
	switch {
	case errors.Is(err, projects.ErrKeyNotLive):
		return ctx, unauthenticated(msgInvalidKey)
	case err != nil:
		return ctx, ToStatus(err)
	case k != p.key:
		// The index's copy and the database disagree about the key's
		// project: trust neither.
		return ctx, unauthenticated(msgInvalidKey)
	}
	return withPrincipal(ctx, Principal{key: k, verified: true}), nil
}

// unaryVerify is verify as a unary interceptor.
func (a authenticator) unaryVerify(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, err := a.verify(ctx)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// errKeyLapsed ends a key's stream whose key stopped authenticating.
var errKeyLapsed = errors.New("project key no longer live")

// streamVerify is verify as a stream interceptor. A key's stream is
// verified again every projects.VerifyCache while it runs: once the key
// is revoked, expires or loses its project, the stream ends
// UNAUTHENTICATED within about that long.
func (a authenticator) streamVerify(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, err := a.verify(ss.Context())
	if err != nil {
		return err
	}
	k, ok := PrincipalFrom(ctx).Key()
	if !ok {
		return handler(srv, ss)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go a.watch(ctx, cancel, k.ID)
	err = handler(srv, &verifiedStream{ServerStream: ss, ctx: ctx})
	if errors.Is(context.Cause(ctx), errKeyLapsed) {
		return unauthenticated(msgInvalidKey)
	}
	return err
}

// watch verifies key id every projects.VerifyCache until ctx ends, and
// cancels it with errKeyLapsed once the database refuses the key.
func (a authenticator) watch(ctx context.Context, cancel context.CancelCauseFunc, id uuid.UUID) {
	t := time.NewTicker(projects.VerifyCache)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := a.keys.Verify(ctx, id); errors.Is(err, projects.ErrKeyNotLive) {
			cancel(errKeyLapsed)
			return
		}
	}
}

// verifiedStream is a ServerStream whose context carries the verified
// principal and ends when the key lapses.
type verifiedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *verifiedStream) Context() context.Context { return s.ctx }
