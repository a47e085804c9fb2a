package strayadmin

import grpcgo "google.golang.org/grpc"

// Server serves nothing the template wants.
type Server struct{}

// New returns the server behind an interface.
func New() ThingServiceServer { return &Server{} }

// Register takes the wrong argument.
func (s *Server) Register(g *grpcgo.ClientConn) {}

// Options is exported but New does not take it.
type Options struct{}
