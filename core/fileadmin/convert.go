package fileadmin

import (
	"github.com/google/uuid"
	"google.golang.org/grpc"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/admin"
	"berth.dev/core/files"
)

// The conversions between berth.admin.v1 FileService messages and
// core/files: the header, resource names, formats, and the streams as the
// logic's Source and Sink. server.go only forwards.

func uploadRequest(h *adminv1.UploadHeader) (files.UploadRequest, error) {
	session, err := parseSession("header.name", h.GetName())
	if err != nil {
		return files.UploadRequest{}, err
	}
	if err := admin.ValidateRequestID("header.request_id", h.GetRequestId()); err != nil {
		return files.UploadRequest{}, err
	}
	f, err := format("header.format", h.GetFormat())
	if err != nil {
		return files.UploadRequest{}, err
	}
	if f == files.FormatTar && (h.GetSize() != 0 || h.GetMode() != 0) {
		return files.UploadRequest{}, errdefs.Invalid("header.size", "is only for format raw (with header.mode)")
	}
	return files.UploadRequest{
		SessionID: session, RequestID: uuid.MustParse(h.GetRequestId()), Path: h.GetPath(), Format: f,
		Mode: h.GetMode(), NoOverwrite: h.GetNoOverwrite(), Size: h.GetSize(),
	}, nil
}

func parseSession(field, name string) (uuid.UUID, error) {
	ids, err := admin.ValidateName(field, name, admin.SessionName)
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.MustParse(ids[0]), nil
}

func format(field string, f adminv1.FileFormat) (files.Format, error) {
	switch f {
	case adminv1.FileFormat_FILE_FORMAT_TAR:
		return files.FormatTar, nil
	case adminv1.FileFormat_FILE_FORMAT_RAW:
		return files.FormatRaw, nil
	}
	return 0, errdefs.Invalid(field, "must be tar or raw")
}

// source adapts an upload's stream: its data messages, io.EOF at the end.
type source struct {
	s grpc.ClientStreamingServer[adminv1.UploadFilesRequest, adminv1.UploadFilesResponse]
}

// errDataExpected refuses a second header or an empty message.
var errDataExpected = errdefs.Invalid("data", "every message after the header must be data")

func (r source) Next() ([]byte, error) {
	m, err := r.s.Recv()
	if err != nil {
		return nil, err
	}
	d, ok := m.GetMessage().(*adminv1.UploadFilesRequest_Data)
	if !ok {
		return nil, errDataExpected
	}
	return d.Data, nil
}

// sink adapts a download's stream.
type sink struct {
	s grpc.ServerStreamingServer[adminv1.DownloadFilesResponse]
}

func (w sink) Header(entries, bytes int64) error {
	return w.s.Send(&adminv1.DownloadFilesResponse{Message: &adminv1.DownloadFilesResponse_Header{
		Header: &adminv1.DownloadHeader{Entries: entries, Bytes: bytes}}})
}

func (w sink) Data(p []byte) error {
	return w.s.Send(&adminv1.DownloadFilesResponse{Message: &adminv1.DownloadFilesResponse_Data{Data: p}})
}
