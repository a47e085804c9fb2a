package turnadmin

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"

	"berth.dev/core/admin"
	"berth.dev/core/store"
	"berth.dev/core/turns"
)

// Server implements berth.admin.v1.TurnService.
type Server struct {
	adminv1.UnimplementedTurnServiceServer
	turns *turns.Service
	pages *admin.PageTokens
}

// New returns the TurnService over t; pages mints the list page tokens.
func New(t *turns.Service, pages *admin.PageTokens) *Server { return &Server{turns: t, pages: pages} }

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterTurnServiceServer(s, g) }

// SubmitTurn queues a Turn.
func (g *Server) SubmitTurn(ctx context.Context, req *adminv1.SubmitTurnRequest) (*adminv1.SubmitTurnResponse, error) {
	r, err := SubmitRequest(req)
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Submit(ctx, admin.ScopeFrom(ctx), r)
	if err != nil {
		return nil, requestPaths.Map(fmt.Errorf("submit turn: %w", err))
	}
	return &adminv1.SubmitTurnResponse{Turn: Proto(t)}, nil
}

// GetTurn reads a Turn.
func (g *Server) GetTurn(ctx context.Context, req *adminv1.GetTurnRequest) (*adminv1.GetTurnResponse, error) {
	s, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Get(ctx, admin.ScopeFrom(ctx), s, id)
	if err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	return &adminv1.GetTurnResponse{Turn: Proto(t)}, nil
}

// ListTurns lists a Session's Turns in submission order.
func (g *Server) ListTurns(ctx context.Context, req *adminv1.ListTurnsRequest) (*adminv1.ListTurnsResponse, error) {
	s, err := parseSession("parent", req.GetParent())
	if err != nil {
		return nil, err
	}
	page, next, err := admin.Paginate(ctx, g.pages, req.GetPageSize(), req.GetPageToken(), turnKeyset(g.turns, admin.ScopeFrom(ctx), s, req.GetParent()))
	if err != nil {
		return nil, err
	}
	return &adminv1.ListTurnsResponse{Turns: admin.Protos(page, Proto), NextPageToken: next}, nil
}

// StreamTurnOutput streams a Turn's output.
func (g *Server) StreamTurnOutput(req *adminv1.StreamTurnOutputRequest, s grpc.ServerStreamingServer[adminv1.StreamTurnOutputResponse]) error {
	sess, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return err
	}
	err = g.turns.StreamOutput(s.Context(), admin.ScopeFrom(s.Context()), sess, id, req.GetStdoutOffset(), req.GetStderrOffset(), func(c turns.Chunk) error {
		stream := adminv1.OutputStream_OUTPUT_STREAM_STDOUT
		if c.Stream == store.StreamStderr {
			stream = adminv1.OutputStream_OUTPUT_STREAM_STDERR
		}
		return s.Send(&adminv1.StreamTurnOutputResponse{Stream: stream, Data: c.Data, Offset: c.Offset})
	})
	if err != nil {
		if s.Context().Err() != nil {
			return s.Context().Err()
		}
		return requestPaths.Map(fmt.Errorf("stream turn output: %w", err))
	}
	return nil
}

// CancelTurn requests cancellation.
func (g *Server) CancelTurn(ctx context.Context, req *adminv1.CancelTurnRequest) (*adminv1.CancelTurnResponse, error) {
	s, id, err := parseTurn("name", req.GetName())
	if err != nil {
		return nil, err
	}
	t, err := g.turns.Cancel(ctx, admin.ScopeFrom(ctx), s, id)
	if err != nil {
		return nil, fmt.Errorf("cancel turn: %w", err)
	}
	return &adminv1.CancelTurnResponse{Turn: Proto(t)}, nil
}
