package nodeagent

import (
	"io"

	"berth.dev/platform/nodewire"
)

// chunkWriter sends what is written in messages of at most
// nodewire.MaxSnapshotChunk: an export's stream. flush sends the rest.
type chunkWriter struct {
	send func([]byte) error
	buf  []byte
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := nodewire.MaxSnapshotChunk - len(w.buf)
		take := min(room, len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == nodewire.MaxSnapshotChunk {
			if err := w.flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.send(w.buf)
	w.buf = w.buf[:0:0]
	return err
}

// chunkReader reads the messages recv returns as one stream: an import's.
// recv's io.EOF is the stream's end.
type chunkReader struct {
	recv func() ([]byte, error)
	buf  []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		b, err := r.recv()
		if err != nil {
			return 0, err
		}
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

var (
	_ io.Writer = (*chunkWriter)(nil)
	_ io.Reader = (*chunkReader)(nil)
)
