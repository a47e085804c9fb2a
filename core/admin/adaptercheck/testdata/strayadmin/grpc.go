package strayadmin

import (
	"context"

	"google.golang.org/grpc"
)

const scopeListThings = "berth.admin.v1.ThingService/ListThings"

// Registry is exported outside server.go.
var Registry = map[string]int{}

// Reader is what the server reads.
type Reader interface {
	Get(context.Context) (int, error)
}

// NewThingServer is a constructor other than New.
func NewThingServer(r Reader) ThingServiceServer { return &server{r: r} }

// Helper is an exported function outside convert.go.
func Helper() {}

type server struct{ r Reader }

func (s *server) ListThings(ctx context.Context) error {
	_, _, err := admin.Paginate(ctx)
	_ = grpc.NewServer
	return err
}
