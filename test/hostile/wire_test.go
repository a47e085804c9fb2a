package hostile

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/test/internal/benchstat"
)

// The admin API's methods the tests call with hand-made bodies.
const (
	previewMethod         = "/berth.admin.v1.DeploymentService/PreviewDeployment"
	getInstallationMethod = "/berth.admin.v1.InstallationService/GetInstallation"
)

// raw is a request body in wire form, sent as is.
type raw []byte

// rawCodec sends raw bodies unchanged and discards replies: the client of
// a hostile caller, who writes whatever bytes it likes. Its name is
// "proto", so the content type is the one every admin call carries.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	r, ok := v.(raw)
	if !ok {
		return nil, errors.New("rawCodec: not raw")
	}
	return r, nil
}

func (rawCodec) Unmarshal([]byte, any) error { return nil }
func (rawCodec) Name() string                { return "proto" }

var _ encoding.Codec = rawCodec{}

// invokeRaw calls method with body in wire form.
func invokeRaw(ctx context.Context, cc *grpc.ClientConn, method string, body []byte) error {
	var reply raw
	return cc.Invoke(ctx, method, raw(body), &reply, grpc.ForceCodec(rawCodec{}))
}

// fieldNumber is the number of field name of message m.
func fieldNumber(m proto.Message, name string) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name)).Number()
}

// appendBytesField appends field num of wire type bytes.
func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

// nestedStruct is a google.protobuf.Struct in wire form nested depth
// objects deep ({"a": {"a": ...}}): three message levels per object
// (Struct, its map entry, Value).
func nestedStruct(depth int) []byte {
	var inner []byte // the innermost, empty Struct
	for range depth {
		value := appendBytesField(nil, 5, inner) // Value.struct_value
		entry := appendBytesField(nil, 1, []byte("a"))
		entry = appendBytesField(entry, 2, value)
		inner = appendBytesField(nil, 1, entry) // Struct.fields
	}
	return inner
}

// nestedPreview is a PreviewDeploymentRequest of about size bytes whose
// candidate configuration holds chains of objects depth deep, one per
// distinct key: the shape that costs a decoder the most memory per byte.
func nestedPreview(size, depth int) []byte {
	chain := nestedStruct(depth)
	var fields []byte
	for i := 0; i == 0 || len(fields) < size; i++ {
		value := appendBytesField(nil, 5, chain)
		entry := appendBytesField(nil, 1, []byte("k"+strconv.Itoa(i)))
		entry = appendBytesField(entry, 2, value)
		fields = appendBytesField(fields, 1, entry)
	}
	candidate := appendBytesField(nil, fieldNumber(&adminv1.DeploymentCandidate{}, "provider_kind"), []byte("docker"))
	candidate = appendBytesField(candidate, fieldNumber(&adminv1.DeploymentCandidate{}, "configuration"), fields)
	return appendBytesField(nil, fieldNumber(&adminv1.PreviewDeploymentRequest{}, "candidate"), candidate)
}

// hugeHeaders is the HPACK block of one gRPC call to method on addr whose
// authorization header holds a bearer token of prefix followed by size
// bytes.
func hugeHeaders(addr, method, prefix string, size int) []byte {
	return headerBlock(addr, method, hpack.HeaderField{Name: "authorization", Value: "Bearer " + prefix + strings.Repeat("x", size), Sensitive: true})
}

// paddedHeaders is the HPACK block of one gRPC call to method on addr with
// n further headers of 1 KiB each: a list past a bound made of fields each
// under it.
func paddedHeaders(addr, method string, n int) []byte {
	var extra []hpack.HeaderField
	for i := range n {
		extra = append(extra, hpack.HeaderField{Name: "x-pad-" + strconv.Itoa(i), Value: strings.Repeat("x", 1<<10), Sensitive: true})
	}
	return headerBlock(addr, method, extra...)
}

// headerBlock is the HPACK block of one gRPC call to method on addr with
// the extra headers, none indexed, so the block is valid as the first on
// any new connection.
func headerBlock(addr, method string, extra ...hpack.HeaderField) []byte {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: addr},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}, extra...) {
		if err := enc.WriteField(f); err != nil {
			panic(err) // a bytes.Buffer does not fail
		}
	}
	return block.Bytes()
}

// sendHeaders opens an HTTP/2 connection to addr and sends one gRPC call
// with the header block (hugeHeaders) and an empty message, ignoring
// whatever header list size the server announces (a grpc-go client would
// refuse to send a block past it). It returns what ended the call:
// "reset <code>" (the stream was reset), "goaway" or "closed" (the
// connection ended), or "status <grpc-status>" (the server answered).
func sendHeaders(ctx context.Context, addr string, block []byte) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	w := bufio.NewWriterSize(conn, 64<<10)
	if _, err := io.WriteString(w, http2.ClientPreface); err != nil {
		return "", err
	}
	fr := http2.NewFramer(w, conn)
	fr.ReadMetaHeaders = hpack.NewDecoder(64<<10, nil)
	fr.MaxHeaderListSize = 64 << 10
	if err := fr.WriteSettings(); err != nil {
		return "", err
	}
	// Send in the background: the server may close the connection long
	// before the block is through.
	sent := make(chan error, 1)
	go func() {
		b := block
		const frame = 16 << 10
		first := min(frame, len(b))
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:first], EndHeaders: first == len(b)})
		for off := first; err == nil && off < len(b); off += frame {
			end := min(off+frame, len(b))
			err = fr.WriteContinuation(1, end == len(b), b[off:end])
		}
		if err == nil {
			err = fr.WriteData(1, true, []byte{0, 0, 0, 0, 0})
		}
		if err == nil {
			err = w.Flush()
		}
		sent <- err
	}()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return "closed", nil
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			// Acknowledging is not needed to see the outcome.
		case *http2.RSTStreamFrame:
			return "reset " + f.ErrCode.String(), nil
		case *http2.GoAwayFrame:
			return "goaway", nil
		case *http2.MetaHeadersFrame:
			var code string
			for _, h := range f.RegularFields() {
				if h.Name == "grpc-status" {
					code = h.Value
				}
			}
			if code == "" {
				continue // response headers; the trailers follow
			}
			return "status " + code, nil
		}
	}
}

// vmRSS reads a process's resident set (VmRSS) and peak (VmHWM) in bytes.
func vmRSS(pid int) (rss, hwm int64, err error) {
	if rss, err = benchstat.ProcStatus(pid, "VmRSS"); err != nil {
		return 0, 0, err
	}
	hwm, err = benchstat.ProcStatus(pid, "VmHWM")
	return rss << 10, hwm << 10, err
}

// attackWindow bounds how long each measured attack runs.
const attackWindow = 10 * time.Second
