package errgrpc

import (
	"context"

	"google.golang.org/grpc"
)

// UnaryServerInterceptor converts the error of every unary method that
// match accepts (every method when match is nil) with convert, once, so
// handlers return plain errors.
func UnaryServerInterceptor(convert func(error) error, match func(fullMethod string) bool) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil && (match == nil || match(info.FullMethod)) {
			return nil, convert(err)
		}
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams.
func StreamServerInterceptor(convert func(error) error, match func(fullMethod string) bool) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if err != nil && (match == nil || match(info.FullMethod)) {
			return convert(err)
		}
		return err
	}
}
