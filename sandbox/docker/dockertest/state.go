package dockertest

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
)

// Container states the fixture models.
const (
	StateCreated = "created"
	StateRunning = "running"
	StatePaused  = "paused"
	StateExited  = "exited"
)

// Container is a snapshot of one container.
type Container struct {
	ID string
	// Name is without the engine's leading "/".
	Name   string
	Labels map[string]string
	// Image is the reference the create named (Config.Image); ImageID is
	// the ID it resolved to.
	Image   string
	ImageID string
	// Config and HostConfig are as posted by container.create.
	Config     container.Config
	HostConfig container.HostConfig
	State      string
	ExitCode   int
	Created    time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	Archives   []Archive
}

// Archive is one tar archive copied into a container.
type Archive struct {
	// Path is the destination path the archive was extracted at.
	Path string
	// NoOverwriteDirNonDir and CopyUIDGID are the request's flags.
	NoOverwriteDirNonDir bool
	CopyUIDGID           bool
	Entries              []ArchiveEntry
	// Data is the tar stream as received.
	Data []byte
}

// ArchiveEntry is one entry of an Archive.
type ArchiveEntry struct {
	Header  tar.Header
	Content []byte
}

// Volume is a snapshot of one volume.
type Volume struct {
	Name       string
	Driver     string
	Labels     map[string]string
	Options    map[string]string
	Mountpoint string
	CreatedAt  time.Time
}

// Exec is a snapshot of one exec instance.
type Exec struct {
	ID          string
	ContainerID string
	Cmd         []string
	User        string
	WorkingDir  string
	Env         []string
	Privileged  bool
	Tty         bool

	AttachStdin, AttachStdout, AttachStderr bool
	// Started is set by exec.start; Running until the command ends.
	Started  bool
	Running  bool
	ExitCode int
	Pid      int
	// Stdin is what the command read from the caller.
	Stdin []byte
}

type ctr struct {
	Container
	seq       int64
	pid       int
	cpuNanos  uint64
	statsRead int
}

type vol struct {
	Volume
	// files is the volume's content by path inside it, from the archives
	// extracted into a mount of it (checkpoint.go).
	files map[string]ArchiveEntry
}

type img struct {
	id   string
	refs []string
}

type execInst struct {
	Exec
	lag int // exec.inspect answers still to report Running
}

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// deepCopy copies v through JSON, which is how the engine received it. A
// value that does not survive the round trip is returned as is.
func deepCopy[T any](v T) T {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return v
	}
	return out
}

func (c *ctr) snapshot() Container {
	out := c.Container
	out.Labels = maps.Clone(c.Labels)
	out.Config = deepCopy(c.Config)
	out.HostConfig = deepCopy(c.HostConfig)
	out.Archives = make([]Archive, len(c.Archives))
	for i, a := range c.Archives {
		a.Data = slices.Clone(a.Data)
		a.Entries = slices.Clone(a.Entries)
		for j := range a.Entries {
			a.Entries[j].Content = slices.Clone(a.Entries[j].Content)
		}
		out.Archives[i] = a
	}
	return out
}

func (v *vol) snapshot() Volume {
	out := v.Volume
	out.Labels = maps.Clone(v.Labels)
	out.Options = maps.Clone(v.Options)
	return out
}

func (e *execInst) snapshot() Exec {
	out := e.Exec
	out.Cmd = slices.Clone(e.Cmd)
	out.Env = slices.Clone(e.Env)
	out.Stdin = slices.Clone(e.Stdin)
	return out
}

// findContainer resolves an ID, a name (with or without "/") or a unique ID
// prefix, in the engine's order. s.mu must be held.
func (s *Server) findContainer(idOrName string) *ctr {
	if c, ok := s.containers[idOrName]; ok {
		return c
	}
	name := strings.TrimPrefix(idOrName, "/")
	for _, c := range s.containers {
		if c.Name == name {
			return c
		}
	}
	var found *ctr
	for id, c := range s.containers {
		if idOrName != "" && strings.HasPrefix(id, idOrName) {
			if found != nil {
				return nil
			}
			found = c
		}
	}
	return found
}

// findImage resolves a reference or an ID. s.mu must be held.
func (s *Server) findImage(ref string) *img {
	cands := []string{ref}
	if !strings.Contains(ref, "@") && !strings.Contains(lastSegment(ref), ":") {
		cands = append(cands, ref+":latest")
	}
	for _, im := range s.images {
		for _, c := range cands {
			if im.id == c || strings.TrimPrefix(im.id, "sha256:") == c || slices.Contains(im.refs, c) {
				return im
			}
		}
	}
	return nil
}

func lastSegment(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 {
		return ref[i+1:]
	}
	return ref
}

// PutImage makes an image present. ref is a reference ("berth/runtime:1",
// "busybox") or an ID ("sha256:..."); a reference gets a stable made-up ID.
// Both the reference and the ID then resolve in image.inspect and
// container.create.
func (s *Server) PutImage(ref string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.findImage(ref) != nil {
		return
	}
	if strings.HasPrefix(ref, "sha256:") {
		s.images = append(s.images, &img{id: ref})
		return
	}
	sum := sha256.Sum256([]byte(ref))
	s.images = append(s.images, &img{id: "sha256:" + hex.EncodeToString(sum[:]), refs: []string{ref}})
}

// PutContainer stores a container directly, bypassing the API (for
// resources no adapter created, such as foreign ones), replacing any
// container of that name. state is StateCreated, StateRunning or
// StateExited. It returns the container's ID.
func (s *Server) PutContainer(name string, labels map[string]string, state string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.findContainer(name); old != nil && old.Name == name {
		s.deleteContainer(old)
	}
	now := time.Now().UTC()
	s.seq++
	c := &ctr{seq: s.seq}
	c.ID = newID()
	c.Name = strings.TrimPrefix(name, "/")
	c.Labels = maps.Clone(labels)
	c.Image = "dockertest/planted:latest"
	c.Config = container.Config{Image: c.Image, Labels: maps.Clone(labels)}
	c.Created = now
	s.setState(c, state, now)
	s.containers[c.ID] = c
	s.issued = append(s.issued, c.ID)
	return c.ID
}

// SetContainerState moves a container to StateCreated, StateRunning or
// StateExited (for example to simulate a runtime that died). It reports
// whether the container exists.
func (s *Server) SetContainerState(idOrName, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findContainer(idOrName)
	if c == nil {
		return false
	}
	s.setState(c, state, time.Now().UTC())
	return true
}

// setState moves c to state. s.mu must be held.
func (s *Server) setState(c *ctr, state string, now time.Time) {
	switch state {
	case StateRunning:
		if c.State != StateRunning && c.State != StatePaused {
			c.StartedAt = now
			s.pid++
			c.pid = s.pid
		}
	case StatePaused:
	case StateExited:
		if c.State == StateRunning || c.State == StatePaused {
			c.FinishedAt = now
		}
		c.pid = 0
	default:
		state = StateCreated
		c.pid = 0
	}
	c.State = state
}

// deleteContainer removes c and its execs. s.mu must be held.
func (s *Server) deleteContainer(c *ctr) {
	delete(s.containers, c.ID)
	for id, e := range s.execs {
		if e.ContainerID == c.ID {
			delete(s.execs, id)
		}
	}
}

// PutVolume stores a local volume directly, bypassing the API, replacing
// any volume of that name.
func (s *Server) PutVolume(name string, labels map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.volumes[name] = newVol(name, "local", labels, nil)
}

func newVol(name, driver string, labels, opts map[string]string) *vol {
	return &vol{Volume{
		Name:       name,
		Driver:     driver,
		Labels:     maps.Clone(labels),
		Options:    maps.Clone(opts),
		Mountpoint: "/var/lib/docker/volumes/" + name + "/_data",
		CreatedAt:  time.Now().UTC().Truncate(time.Second),
	}, nil}
}

// Container returns a snapshot of the container with that ID or name.
func (s *Server) Container(idOrName string) (Container, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findContainer(idOrName)
	if c == nil {
		return Container{}, false
	}
	return c.snapshot(), true
}

// Containers returns snapshots of every container, by name.
func (s *Server) Containers() []Container {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Container, 0, len(s.containers))
	for _, c := range s.containers {
		out = append(out, c.snapshot())
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Archives returns the archives copied into the container with that ID or
// name, in order, or nil.
func (s *Server) Archives(idOrName string) []Archive {
	c, ok := s.Container(idOrName)
	if !ok {
		return nil
	}
	return c.Archives
}

// Volume returns a snapshot of the named volume.
func (s *Server) Volume(name string) (Volume, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[name]
	if !ok {
		return Volume{}, false
	}
	return v.snapshot(), true
}

// Volumes returns snapshots of every volume, by name.
func (s *Server) Volumes() []Volume {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Volume, 0, len(s.volumes))
	for _, v := range s.volumes {
		out = append(out, v.snapshot())
	}
	slices.SortFunc(out, func(a, b Volume) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Exec returns a snapshot of the exec instance with that ID.
func (s *Server) Exec(id string) (Exec, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.execs[id]
	if !ok {
		return Exec{}, false
	}
	return e.snapshot(), true
}

// Execs returns snapshots of every exec instance, by ID.
func (s *Server) Execs() []Exec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Exec, 0, len(s.execs))
	for _, e := range s.execs {
		out = append(out, e.snapshot())
	}
	slices.SortFunc(out, func(a, b Exec) int { return strings.Compare(a.ID, b.ID) })
	return out
}
