package fileadmin

import (
	"errors"
	"io"

	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/files"
)

// Server implements berth.admin.v1.FileService.
type Server struct {
	adminv1.UnimplementedFileServiceServer
	files *files.Service
}

// New returns the FileService over f.
func New(f *files.Service) *Server { return &Server{files: f} }

// Register registers the service on s.
func (g *Server) Register(s *grpc.Server) { adminv1.RegisterFileServiceServer(s, g) }

// UploadFiles writes an archive or one file into a Session's workspace.
func (g *Server) UploadFiles(s grpc.ClientStreamingServer[adminv1.UploadFilesRequest, adminv1.UploadFilesResponse]) error {
	first, err := s.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errdefs.Invalid("header", "is required as the first message")
		}
		return err
	}
	h := first.GetHeader()
	if h == nil {
		return errdefs.Invalid("header", "is required as the first message")
	}
	admin.NoteResource(s.Context(), h.GetName())
	r, err := uploadRequest(h)
	if err != nil {
		return err
	}
	res, err := g.files.Upload(s.Context(), admin.ScopeFrom(s.Context()), r, source{s})
	if err != nil {
		if s.Context().Err() != nil {
			return s.Context().Err()
		}
		return err
	}
	return s.SendAndClose(&adminv1.UploadFilesResponse{
		Files: res.Files, Directories: res.Directories, Symlinks: res.Symlinks, Hardlinks: res.Hardlinks,
		Bytes: res.Bytes, ModesMasked: res.ModesMasked,
	})
}

// DownloadFiles reads a file or tree of a Session's workspace.
func (g *Server) DownloadFiles(req *adminv1.DownloadFilesRequest, s grpc.ServerStreamingServer[adminv1.DownloadFilesResponse]) error {
	admin.NoteResource(s.Context(), req.GetName())
	session, err := parseSession("name", req.GetName())
	if err != nil {
		return err
	}
	f, err := format("format", req.GetFormat())
	if err != nil {
		return err
	}
	r := files.DownloadRequest{SessionID: session, RequestID: admin.RequestIDFrom(s.Context()), Path: req.GetPath(), Format: f}
	_, err = g.files.Download(s.Context(), admin.ScopeFrom(s.Context()), r, sink{s})
	if err != nil && s.Context().Err() != nil {
		return s.Context().Err()
	}
	return err
}
