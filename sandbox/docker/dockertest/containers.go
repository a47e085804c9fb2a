package dockertest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
)

var validName = regexp.MustCompile(`^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

const zeroTime = "0001-01-01T00:00:00Z"

func noSuchContainer(id string) *reply {
	return errReply(http.StatusNotFound, "No such container: %s", id)
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return zeroTime
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (s *Server) containerCreate(r *http.Request) *reply {
	var req container.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return errReply(http.StatusBadRequest, "invalid JSON: %v", err)
	}
	if req.Config == nil {
		return errReply(http.StatusBadRequest, "config cannot be empty in order to create a container")
	}
	name := r.URL.Query().Get("name")
	if name != "" && !validName.MatchString(name) {
		return errReply(http.StatusBadRequest, "Invalid container name (%s), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed", name)
	}
	name = strings.TrimPrefix(name, "/")
	var hc container.HostConfig
	if req.HostConfig != nil {
		hc = *req.HostConfig
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if rep := s.validateHostConfig(&hc); rep != nil {
		return rep
	}
	im := s.findImage(req.Config.Image)
	if req.Config.Image == "" || im == nil {
		ref := req.Config.Image
		if !strings.Contains(ref, "@") && !strings.Contains(lastSegment(ref), ":") {
			ref += ":latest"
		}
		return errReply(http.StatusNotFound, "No such image: %s", ref)
	}
	if name == "" {
		name = "dockertest_" + newID()[:12]
	}
	for _, c := range s.containers {
		if c.Name == name {
			return errReply(http.StatusConflict, "Conflict. The container name \"/%s\" is already in use by container \"%s\". You have to remove (or rename) that container to be able to reuse that name.", name, c.ID)
		}
	}
	s.createMountVolumes(&hc)

	now := time.Now().UTC()
	s.seq++
	c := &ctr{seq: s.seq}
	c.ID = newID()
	c.Name = name
	c.Labels = maps.Clone(req.Config.Labels)
	c.Image = req.Config.Image
	c.ImageID = im.id
	c.Config = deepCopy(*req.Config)
	c.HostConfig = deepCopy(hc)
	c.State = StateCreated
	c.Created = now
	s.containers[c.ID] = c
	s.issued = append(s.issued, c.ID)
	return jsonReply(http.StatusCreated, container.CreateResponse{ID: c.ID, Warnings: []string{}})
}

// validateHostConfig refuses the resource settings a real engine refuses.
// s.mu must be held.
func (s *Server) validateHostConfig(hc *container.HostConfig) *reply {
	if hc.Memory != 0 && hc.Memory < 6*1024*1024 {
		return errReply(http.StatusBadRequest, "Minimum memory limit allowed is 6MB")
	}
	if hc.NanoCPUs != 0 && hc.CPUPeriod != 0 {
		return errReply(http.StatusBadRequest, "Conflicting options: Nano CPUs and CPU Period cannot both be set")
	}
	if hc.NanoCPUs != 0 && hc.CPUQuota != 0 {
		return errReply(http.StatusBadRequest, "Conflicting options: Nano CPUs and CPU Quota cannot both be set")
	}
	if n := int64(s.info.NCPU); hc.NanoCPUs < 0 || hc.NanoCPUs > n*1e9 {
		return errReply(http.StatusBadRequest, "Range of CPUs is from 0.01 to %d.00, as there are only %d CPUs available", n, n)
	}
	for _, m := range hc.Mounts {
		if m.Target == "" {
			return errReply(http.StatusBadRequest, "invalid mount config: Target must not be empty")
		}
		if m.Type == mount.TypeVolume && m.Source != "" && !validName.MatchString(m.Source) {
			return errReply(http.StatusBadRequest, "invalid mount config for type \"volume\": invalid volume name %q", m.Source)
		}
	}
	return nil
}

// createMountVolumes creates, as the engine does, the named volumes a
// create refers to that do not exist yet. s.mu must be held.
func (s *Server) createMountVolumes(hc *container.HostConfig) {
	for _, m := range hc.Mounts {
		if m.Type != mount.TypeVolume || m.Source == "" {
			continue
		}
		if _, ok := s.volumes[m.Source]; ok {
			continue
		}
		var labels map[string]string
		if m.VolumeOptions != nil {
			labels = m.VolumeOptions.Labels
		}
		s.volumes[m.Source] = newVol(m.Source, "local", labels, nil)
	}
	for _, b := range hc.Binds {
		src, _, _ := strings.Cut(b, ":")
		if src == "" || strings.HasPrefix(src, "/") {
			continue
		}
		if _, ok := s.volumes[src]; !ok {
			s.volumes[src] = newVol(src, "local", nil, nil)
		}
	}
}

// usesVolume reports whether c mounts the named volume.
func (c *ctr) usesVolume(name string) bool {
	for _, m := range c.HostConfig.Mounts {
		if m.Type == mount.TypeVolume && m.Source == name {
			return true
		}
	}
	for _, b := range c.HostConfig.Binds {
		if src, _, _ := strings.Cut(b, ":"); src == name {
			return true
		}
	}
	return false
}

func (c *ctr) mountPoints() []container.MountPoint {
	out := []container.MountPoint{}
	for _, m := range c.HostConfig.Mounts {
		mp := container.MountPoint{Type: m.Type, Source: m.Source, Destination: m.Target, RW: !m.ReadOnly, Propagation: mount.PropagationRPrivate}
		if m.Type == mount.TypeVolume {
			mp.Name = m.Source
			mp.Source = "/var/lib/docker/volumes/" + m.Source + "/_data"
			mp.Driver = "local"
			mp.Mode = "z"
			mp.Propagation = ""
		}
		out = append(out, mp)
	}
	for _, b := range c.HostConfig.Binds {
		parts := strings.Split(b, ":")
		if len(parts) < 2 {
			continue
		}
		mp := container.MountPoint{Type: mount.TypeBind, Source: parts[0], Destination: parts[1], RW: true, Propagation: mount.PropagationRPrivate}
		if len(parts) > 2 {
			mp.Mode = parts[2]
			mp.RW = !slices.Contains(strings.Split(parts[2], ","), "ro")
		}
		if !strings.HasPrefix(parts[0], "/") {
			mp.Type, mp.Name, mp.Driver, mp.Propagation = mount.TypeVolume, parts[0], "local", ""
			mp.Source = "/var/lib/docker/volumes/" + parts[0] + "/_data"
		}
		out = append(out, mp)
	}
	return out
}

func (c *ctr) inspect() container.InspectResponse {
	var p string
	var args []string
	cmd := append(slices.Clone(c.Config.Entrypoint), c.Config.Cmd...)
	if len(cmd) > 0 {
		p, args = cmd[0], cmd[1:]
	}
	if args == nil {
		args = []string{}
	}
	cfg := deepCopy(c.Config)
	hc := deepCopy(c.HostConfig)
	return container.InspectResponse{
		ID:      c.ID,
		Created: formatTime(c.Created),
		Path:    p,
		Args:    args,
		State: &container.State{
			Status:     container.ContainerState(c.State),
			Running:    c.State == StateRunning || c.State == StatePaused,
			Paused:     c.State == StatePaused,
			Pid:        c.pid,
			ExitCode:   c.ExitCode,
			StartedAt:  formatTime(c.StartedAt),
			FinishedAt: formatTime(c.FinishedAt),
		},
		Image:           c.ImageID,
		ResolvConfPath:  "/var/lib/docker/containers/" + c.ID + "/resolv.conf",
		HostnamePath:    "/var/lib/docker/containers/" + c.ID + "/hostname",
		HostsPath:       "/var/lib/docker/containers/" + c.ID + "/hosts",
		LogPath:         "/var/lib/docker/containers/" + c.ID + "/" + c.ID + "-json.log",
		Name:            "/" + c.Name,
		Driver:          "overlay2",
		Platform:        "linux",
		HostConfig:      &hc,
		Config:          &cfg,
		Mounts:          c.mountPoints(),
		NetworkSettings: &container.NetworkSettings{},
	}
}

// withContainer answers with f, run under s.mu, for the container the
// request's {id} names, or with the engine's "No such container" when
// none matches: the start of every per-container handler.
func (s *Server) withContainer(r *http.Request, f func(c *ctr) *reply) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.findContainer(r.PathValue("id"))
	if c == nil {
		return noSuchContainer(r.PathValue("id"))
	}
	return f(c)
}

func (s *Server) containerInspect(r *http.Request) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		return jsonReply(http.StatusOK, c.inspect())
	})
}

func (s *Server) containerArchive(r *http.Request) *reply {
	q := r.URL.Query()
	dst := q.Get("path")
	if dst == "" {
		return errReply(http.StatusBadRequest, "path is required")
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return errReply(http.StatusBadRequest, "reading archive: %v", err)
	}
	entries, err := readTar(data)
	if err != nil {
		return errReply(http.StatusBadRequest, "Error processing tar file: %v", err)
	}

	return s.withContainer(r, func(c *ctr) *reply {
		if rep := c.checkWritable(dst); rep != nil {
			return rep
		}
		c.Archives = append(c.Archives, Archive{
			Path:                 dst,
			NoOverwriteDirNonDir: boolValue(q, "noOverwriteDirNonDir"),
			CopyUIDGID:           boolValue(q, "copyUIDGID"),
			Entries:              entries,
			Data:                 data,
		})
		s.extractIntoVolume(c, dst, entries)
		return &reply{status: http.StatusOK}
	})
}

// checkWritable refuses an extraction the engine would refuse: into a
// read-only mount, or into a read-only rootfs outside a writable mount.
func (c *ctr) checkWritable(dst string) *reply {
	dst = path.Clean("/" + dst)
	var best *container.MountPoint
	mps := c.mountPoints()
	for i, mp := range mps {
		d := path.Clean(mp.Destination)
		if dst == d || strings.HasPrefix(dst, d+"/") {
			if best == nil || len(d) > len(best.Destination) {
				best = &mps[i]
			}
		}
	}
	if best != nil {
		if !best.RW {
			return errReply(http.StatusForbidden, "mounted volume is marked read-only")
		}
		return nil
	}
	if c.HostConfig.ReadonlyRootfs {
		return errReply(http.StatusForbidden, "container rootfs is marked read-only")
	}
	return nil
}

func readTar(data []byte) ([]ArchiveEntry, error) {
	tr := tar.NewReader(bytes.NewReader(data))
	var out []ArchiveEntry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		out = append(out, ArchiveEntry{Header: *h, Content: content})
	}
}

func (s *Server) containerStart(r *http.Request) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		if c.State == StateRunning {
			return &reply{status: http.StatusNotModified}
		}
		for _, m := range c.HostConfig.Mounts {
			if m.Type == mount.TypeVolume && m.Source != "" {
				if _, ok := s.volumes[m.Source]; !ok {
					// The engine recreates a missing named volume on start.
					s.volumes[m.Source] = newVol(m.Source, "local", nil, nil)
				}
			}
		}
		c.ExitCode = 0
		s.setState(c, StateRunning, time.Now().UTC())
		return &reply{status: http.StatusNoContent}
	})
}

func (s *Server) containerStop(r *http.Request) *reply {
	return s.exitContainer(r, 143, func(*ctr) *reply { return &reply{status: http.StatusNotModified} })
}

func (s *Server) containerKill(r *http.Request) *reply {
	return s.exitContainer(r, 137, func(c *ctr) *reply {
		return errReply(http.StatusConflict, "cannot kill container: %s: container %s is not running", r.PathValue("id"), c.ID)
	})
}

// exitContainer ends the running container the request names with the
// exit code a stop (143, SIGTERM) or a kill (137, SIGKILL) leaves;
// notRunning is the engine's answer for a container that does not run.
func (s *Server) exitContainer(r *http.Request, code int, notRunning func(c *ctr) *reply) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		if c.State != StateRunning {
			return notRunning(c)
		}
		c.ExitCode = code
		s.setState(c, StateExited, time.Now().UTC())
		return &reply{status: http.StatusNoContent}
	})
}

func (s *Server) containerRemove(r *http.Request) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		if (c.State == StateRunning || c.State == StatePaused) && !boolValue(r.URL.Query(), "force") {
			return errReply(http.StatusConflict, "cannot remove container \"/%s\": container is running: stop the container before removing or force remove", c.Name)
		}
		s.deleteContainer(c)
		return &reply{status: http.StatusNoContent}
	})
}

func (s *Server) containerStats(r *http.Request) *reply {
	q := r.URL.Query()
	if q.Get("stream") == "" || boolValue(q, "stream") {
		return errReply(http.StatusNotImplemented, "dockertest: streaming stats are not modelled; send stream=false")
	}
	return s.withContainer(r, func(c *ctr) *reply {
		st := container.StatsResponse{ID: c.ID, Name: "/" + c.Name, OSType: "linux"}
		if c.State != StateRunning {
			return jsonReply(http.StatusOK, st)
		}
		now := time.Now().UTC()
		c.statsRead++
		prev := c.cpuNanos
		c.cpuNanos += 25_000_000 // 25ms of CPU per sample
		sys := uint64(now.UnixNano()) * uint64(s.info.NCPU)
		cpu := func(total, system uint64) container.CPUStats {
			return container.CPUStats{
				CPUUsage: container.CPUUsage{
					TotalUsage:        total,
					UsageInUsermode:   total / 5 * 4,
					UsageInKernelmode: total / 5,
				},
				SystemUsage:    system,
				OnlineCPUs:     uint32(s.info.NCPU),
				ThrottlingData: container.ThrottlingData{Periods: uint64(c.statsRead) * 10},
			}
		}
		memLimit := uint64(s.info.MemTotal)
		if c.HostConfig.Memory > 0 {
			memLimit = uint64(c.HostConfig.Memory)
		}
		var pidsLimit uint64
		if c.HostConfig.PidsLimit != nil && *c.HostConfig.PidsLimit > 0 {
			pidsLimit = uint64(*c.HostConfig.PidsLimit)
		}
		st.Read = now
		st.CPUStats = cpu(c.cpuNanos, sys)
		st.MemoryStats = container.MemoryStats{
			Usage: 48 << 20,
			Limit: memLimit,
			Stats: map[string]uint64{
				"anon":          40 << 20,
				"file":          8 << 20,
				"inactive_file": 4 << 20,
				"active_file":   4 << 20,
			},
		}
		st.PidsStats = container.PidsStats{Current: 3, Limit: pidsLimit}
		st.Networks = map[string]container.NetworkStats{"eth0": {RxBytes: 1024, RxPackets: 8, TxBytes: 512, TxPackets: 4}}
		if !boolValue(q, "one-shot") {
			st.PreRead = now.Add(-time.Second)
			st.PreCPUStats = cpu(prev, sys-uint64(time.Second)*uint64(s.info.NCPU))
		}
		return jsonReply(http.StatusOK, st)
	})
}

func (s *Server) containerList(r *http.Request) *reply {
	q := r.URL.Query()
	f, err := parseFilters(q.Get("filters"))
	if err != nil {
		return errReply(http.StatusBadRequest, "%v", err)
	}
	if err := f.validate("label", "name", "id", "status"); err != nil {
		return errReply(http.StatusBadRequest, "%v", err)
	}
	for _, st := range f["status"] {
		if !slices.Contains([]string{"created", "restarting", "running", "removing", "paused", "exited", "dead"}, st) {
			return errReply(http.StatusBadRequest, "invalid filter 'status=%s'", st)
		}
	}
	all := boolValue(q, "all")
	limit, _ := strconv.Atoi(q.Get("limit"))

	s.mu.Lock()
	defer s.mu.Unlock()
	var matched []*ctr
	for _, c := range s.containers {
		if !all && c.State != StateRunning {
			continue
		}
		ok, err := c.matches(f)
		if err != nil {
			return errReply(http.StatusBadRequest, "%v", err)
		}
		if ok {
			matched = append(matched, c)
		}
	}
	// Newest first, as the engine lists.
	slices.SortFunc(matched, func(a, b *ctr) int { return int(b.seq - a.seq) })
	if limit > 0 && len(matched) > limit {
		matched = matched[:limit]
	}
	out := make([]container.Summary, 0, len(matched))
	for _, c := range matched {
		out = append(out, c.summary())
	}
	return jsonReply(http.StatusOK, out)
}

func (c *ctr) matches(f filters) (bool, error) {
	if !matchLabels(f["label"], c.Labels) {
		return false, nil
	}
	if v := f["status"]; len(v) > 0 && !slices.Contains(v, c.State) {
		return false, nil
	}
	if v := f["id"]; len(v) > 0 && !slices.ContainsFunc(v, func(p string) bool { return strings.HasPrefix(c.ID, p) }) {
		return false, nil
	}
	if v := f["name"]; len(v) > 0 {
		ok, err := matchAnyRegexp(v, "/"+c.Name)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func (c *ctr) summary() container.Summary {
	cmd := strings.Join(append(slices.Clone(c.Config.Entrypoint), c.Config.Cmd...), " ")
	labels := maps.Clone(c.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	sum := container.Summary{
		ID:      c.ID,
		Names:   []string{"/" + c.Name},
		Image:   c.Image,
		ImageID: c.ImageID,
		Command: cmd,
		Created: c.Created.Unix(),
		Ports:   []container.PortSummary{},
		Labels:  labels,
		State:   container.ContainerState(c.State),
		Status:  c.status(),
		Mounts:  c.mountPoints(),
	}
	sum.HostConfig.NetworkMode = string(c.HostConfig.NetworkMode)
	if sum.HostConfig.NetworkMode == "" {
		sum.HostConfig.NetworkMode = "bridge"
	}
	return sum
}

func (c *ctr) status() string {
	switch c.State {
	case StateRunning:
		return "Up " + humanDuration(time.Since(c.StartedAt))
	case StatePaused:
		return "Up " + humanDuration(time.Since(c.StartedAt)) + " (Paused)"
	case StateExited:
		return fmt.Sprintf("Exited (%d) %s ago", c.ExitCode, humanDuration(time.Since(c.FinishedAt)))
	}
	return "Created"
}

func humanDuration(d time.Duration) string {
	switch s := int(d.Seconds()); {
	case s < 1:
		return "Less than a second"
	case s == 1:
		return "1 second"
	case s < 60:
		return fmt.Sprintf("%d seconds", s)
	case s < 3600:
		return fmt.Sprintf("%d minutes", s/60)
	default:
		return fmt.Sprintf("%d hours", s/3600)
	}
}
