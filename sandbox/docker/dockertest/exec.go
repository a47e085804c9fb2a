package dockertest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/common"
	"github.com/moby/moby/api/types/container"
)

// The media types of an exec's output stream.
const (
	MediaTypeMultiplexed = "application/vnd.docker.multiplexed-stream"
	MediaTypeRaw         = "application/vnd.docker.raw-stream"
)

// cancelGrace is how long exec.start under FaultCancelAfterDispatch waits,
// after the 101, before cancelling an exec without stdin.
const cancelGrace = 100 * time.Millisecond

// maxStdin bounds what the fixture reads from an exec's stdin.
const maxStdin = 64 << 20

func noSuchExec(id string) *reply {
	return errReply(http.StatusNotFound, "No such exec instance: %s", id)
}

func (s *Server) execCreate(r *http.Request) *reply {
	var req container.ExecCreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return errReply(http.StatusBadRequest, "invalid JSON: %v", err)
	}
	if len(req.Cmd) == 0 {
		return errReply(http.StatusBadRequest, "No exec command specified")
	}
	return s.withContainer(r, func(c *ctr) *reply {
		if c.State != StateRunning {
			return errReply(http.StatusConflict, "container %s is not running", c.ID)
		}
		e := &execInst{Exec: Exec{
			ID:           newID(),
			ContainerID:  c.ID,
			Cmd:          slices.Clone(req.Cmd),
			User:         req.User,
			WorkingDir:   req.WorkingDir,
			Env:          slices.Clone(req.Env),
			Privileged:   req.Privileged,
			Tty:          req.Tty,
			AttachStdin:  req.AttachStdin,
			AttachStdout: req.AttachStdout,
			AttachStderr: req.AttachStderr,
		}}
		s.execs[e.ID] = e
		s.issued = append(s.issued, e.ID)
		return jsonReply(http.StatusCreated, common.IDResponse{ID: e.ID})
	})
}

func (s *Server) execInspect(r *http.Request) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[r.PathValue("id")]
	if !ok {
		return noSuchExec(r.PathValue("id"))
	}
	running := e.Running
	if e.Started && !e.Running && e.lag > 0 {
		// The engine has not recorded the exit yet.
		e.lag--
		running = true
	}
	var code *int
	if e.Started && !running {
		c := e.ExitCode
		code = &c
	}
	priv := e.Privileged
	return jsonReply(http.StatusOK, container.ExecInspectResponse{
		ID:       e.ID,
		Running:  running,
		ExitCode: code,
		ProcessConfig: &container.ExecProcessConfig{
			Tty:        e.Tty,
			Entrypoint: e.Cmd[0],
			Arguments:  slices.Clone(e.Cmd[1:]),
			Privileged: &priv,
			User:       e.User,
		},
		OpenStdin:   e.AttachStdin,
		OpenStdout:  e.AttachStdout,
		OpenStderr:  e.AttachStderr,
		ContainerID: e.ContainerID,
		Pid:         e.Pid,
	})
}

// startExec marks the exec started, or says why it cannot start.
func (s *Server) startExec(id string) (Exec, *reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return Exec{}, noSuchExec(id)
	}
	if e.Running {
		return Exec{}, errReply(http.StatusConflict, "Error: Exec command %s is already running", id)
	}
	if e.Started {
		return Exec{}, errReply(http.StatusConflict, "Error: Exec command %s has already run", id)
	}
	if c, ok := s.containers[e.ContainerID]; !ok || c.State != StateRunning {
		return Exec{}, errReply(http.StatusConflict, "container %s is not running", e.ContainerID)
	}
	s.pid++
	e.Started, e.Running, e.Pid = true, true, s.pid
	return e.snapshot(), nil
}

// finishExec records the end of an exec's command.
func (s *Server) finishExec(id string, stdin []byte, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.execs[id]; ok {
		e.Running, e.ExitCode, e.Stdin = false, code, slices.Clone(stdin)
		e.lag = s.execLag
	}
}

// SetExecInspectLag makes exec.inspect report each exec Running, without an
// exit code, for its first n inspections after its command ended, as a real
// engine may briefly do after the output stream closes. The default is 0.
// It applies to execs that end after the call.
func (s *Server) SetExecInspectLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.execLag = n
}

// execStart answers exec.start like the engine: a detached start or one
// without an upgrade runs the command and answers over HTTP; otherwise the
// connection is hijacked, upgraded (101) and carries stdin in and the
// output stream out.
func (s *Server) execStart(w http.ResponseWriter, r *http.Request) {
	a, ok := s.admit(CallExecStart, w, r)
	if !ok {
		return
	}
	var req container.ExecStartRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeReply(w, errReply(http.StatusBadRequest, "invalid JSON: %v", err))
		return
	}
	// Whatever follows the body on the connection is stdin.
	_, _ = io.Copy(io.Discard, r.Body)

	e, rep := s.startExec(r.PathValue("id"))
	if rep != nil {
		writeReply(w, rep)
		return
	}
	media := MediaTypeMultiplexed
	if e.Tty {
		media = MediaTypeRaw
	}

	upgrade := strings.EqualFold(r.Header.Get("Upgrade"), "tcp") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
	if req.Detach || !upgrade {
		s.execPlain(w, r, a, e, req.Detach, media)
		return
	}

	hj, ok := w.(http.Hijacker)
	if !ok {
		writeReply(w, errReply(http.StatusInternalServerError, "dockertest: cannot hijack"))
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	if !s.track(conn) {
		_ = conn.Close()
		return
	}
	defer s.untrack(conn)

	if _, err := conn.Write(upgradeHead(w, media)); err != nil {
		s.finishExec(e.ID, nil, 137)
		return
	}
	if a.fault == FaultCancelAfterDispatch {
		s.execCancelled(a, e, brw)
		return
	}
	s.execStream(conn, brw, e)
}

// execPlain runs e's command for a start without an upgrade: a detached
// start answers an empty 200, any other the output stream as the body.
// Under FaultCancelAfterDispatch the command still runs, and the answer is
// withheld.
func (s *Server) execPlain(w http.ResponseWriter, r *http.Request, a armed, e Exec, detach bool, media string) {
	res := runCommand(e.Cmd, nil)
	s.finishExec(e.ID, nil, res.code)
	if a.fault == FaultCancelAfterDispatch {
		s.withhold(r, a.cancel)
		return
	}
	if detach {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", media)
	w.WriteHeader(http.StatusOK)
	_ = res.write(w, e)
}

// upgradeHead is the engine's 101 answer to an upgraded exec.start, with
// the version headers the server set on w, written by hand because the
// connection is already hijacked.
func upgradeHead(w http.ResponseWriter, media string) []byte {
	var head bytes.Buffer
	head.WriteString("HTTP/1.1 101 UPGRADED\r\n")
	head.WriteString("Content-Type: " + media + "\r\n")
	head.WriteString("Connection: Upgrade\r\nUpgrade: tcp\r\n")
	for _, k := range []string{"Api-Version", "Docker-Experimental", "Ostype", "Server"} {
		head.WriteString(k + ": " + w.Header().Get(k) + "\r\n")
	}
	head.WriteString("\r\n")
	return head.Bytes()
}

// execCancelled is an upgraded exec.start under FaultCancelAfterDispatch:
// the command runs to completion (its stdin read to the end), its output
// is withheld, then the caller is cancelled and the connection held.
// Without stdin, a grace period lets the client hand the hijacked
// connection to its caller first, so that the cancellation arrives
// mid-stream rather than racing the handshake.
func (s *Server) execCancelled(a armed, e Exec, brw *bufio.ReadWriter) {
	var stdin []byte
	if e.AttachStdin {
		stdin, _ = io.ReadAll(io.LimitReader(brw.Reader, maxStdin))
	}
	s.finishExec(e.ID, stdin, runCommand(e.Cmd, stdin).code)
	if !e.AttachStdin {
		select {
		case <-time.After(cancelGrace):
		case <-s.done:
		}
	}
	if a.cancel != nil {
		a.cancel()
	}
	// Hold: never answer, until the caller closes and the server ends.
	_, _ = io.Copy(io.Discard, brw.Reader)
	<-s.done
}

// execStream is an upgraded exec.start: it reads stdin until the client
// closes its write side, runs the command, writes its output stream and
// closes the connection gracefully.
func (s *Server) execStream(conn net.Conn, brw *bufio.ReadWriter, e Exec) {
	var stdin []byte
	if e.AttachStdin {
		// Until the client closes its write side.
		stdin, _ = io.ReadAll(io.LimitReader(brw.Reader, maxStdin))
	}
	res := runCommand(e.Cmd, stdin)
	bw := bufio.NewWriterSize(conn, 64<<10)
	_ = res.write(bw, e)
	_ = bw.Flush()
	s.finishExec(e.ID, stdin, res.code)
	closeGracefully(conn)
}

// closeGracefully ends the stream and waits briefly for the client to
// close, so that no unread data turns the close into a reset.
func closeGracefully(conn net.Conn) {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.Copy(io.Discard, conn)
	}
	_ = conn.Close()
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return false
	default:
	}
	s.hijacked[c] = struct{}{}
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.hijacked, c)
}

// Stream numbers of the multiplexed stream.
const (
	streamStdout byte = 1
	streamStderr byte = 2
)

type chunk struct {
	stream byte
	data   []byte
}

type result struct {
	out  []chunk
	code int
}

func (r *result) stdout(b []byte) { r.out = append(r.out, chunk{streamStdout, b}) }
func (r *result) stderr(b []byte) { r.out = append(r.out, chunk{streamStderr, b}) }

// runCommand runs the fixture's built-in command set.
func runCommand(args []string, stdin []byte) result {
	var res result
	switch args[0] {
	case "echo":
		res.stdout([]byte(strings.Join(args[1:], " ") + "\n"))
	case "cat":
		res.stdout(stdin)
	case "fail":
		res.code = 1
		if len(args) > 1 {
			if n, err := strconv.Atoi(args[1]); err == nil {
				res.code = n
			}
		}
		if len(args) > 2 {
			res.stderr([]byte(strings.Join(args[2:], " ")))
		}
	case "big":
		n := 0
		if len(args) > 1 {
			n, _ = strconv.Atoi(args[1])
		}
		if n < 0 || n > 1<<30 {
			res.stderr([]byte("big: invalid size"))
			res.code = 2
			break
		}
		res.stdout(bytes.Repeat([]byte{'x'}, n))
	case "interleave":
		res.stdout([]byte("o1"))
		res.stderr([]byte("e1"))
		res.stdout([]byte("o2"))
	default:
		res.stderr([]byte(fmt.Sprintf("%s: not found", args[0])))
		res.code = 127
	}
	return res
}

// maxFrame is the largest payload of one multiplexed frame.
const maxFrame = 32 << 10

// write writes the output the exec attached: stdcopy frames (an 8-byte
// header: stream, three zero bytes, big-endian length), or raw bytes for a
// TTY.
func (r *result) write(w io.Writer, e Exec) error {
	for _, c := range r.out {
		if (c.stream == streamStdout && !e.AttachStdout) || (c.stream == streamStderr && !e.AttachStderr) {
			continue
		}
		if e.Tty {
			if _, err := w.Write(c.data); err != nil {
				return err
			}
			continue
		}
		for data := c.data; len(data) > 0; {
			n := min(len(data), maxFrame)
			var hdr [8]byte
			hdr[0] = c.stream
			binary.BigEndian.PutUint32(hdr[4:], uint32(n))
			if _, err := w.Write(hdr[:]); err != nil {
				return err
			}
			if _, err := w.Write(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
	}
	return nil
}
