package dockertest

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
)

// The calls of the Docker adapter's checkpoints: pause and unpause, and
// the archive read (GET /containers/{id}/archive) of a path inside a
// volume mount. Volumes keep the entries extracted into them through a
// mount (archive writes), so that a capture copied from one container into
// another reads back what was written; paths outside volume mounts are not
// modelled.

// volumeAt resolves p inside c to the volume mounted there and the path
// inside that volume (the mount's subpath included). ok is false outside
// volume mounts.
func (c *ctr) volumeAt(p string) (name, inside string, ok bool) {
	p = path.Clean("/" + p)
	var best *mount.Mount
	for i, m := range c.HostConfig.Mounts {
		d := path.Clean(m.Target)
		if m.Type == mount.TypeVolume && (p == d || strings.HasPrefix(p, d+"/")) {
			if best == nil || len(d) > len(path.Clean(best.Target)) {
				best = &c.HostConfig.Mounts[i]
			}
		}
	}
	if best == nil {
		return "", "", false
	}
	inside = strings.TrimPrefix(strings.TrimPrefix(p, path.Clean(best.Target)), "/")
	if best.VolumeOptions != nil && best.VolumeOptions.Subpath != "" {
		inside = path.Join(best.VolumeOptions.Subpath, inside)
	}
	return best.Source, inside, true
}

// extractIntoVolume records entries, extracted at dst in c, as the content
// of the volume mounted there. s.mu must be held.
func (s *Server) extractIntoVolume(c *ctr, dst string, entries []ArchiveEntry) {
	name, inside, ok := c.volumeAt(dst)
	if !ok {
		return
	}
	v := s.volumes[name]
	if v == nil {
		return
	}
	if v.files == nil {
		v.files = map[string]ArchiveEntry{}
	}
	for _, e := range entries {
		rel := path.Clean(e.Header.Name)
		if rel == "." {
			continue
		}
		key := path.Join(inside, rel)
		e.Header.Name = key
		v.files[key] = e
	}
}

// archiveRead answers GET /containers/{id}/archive?path=P for a P inside a
// volume mount ("/dir/." reads dir's contents): a tar of the volume's
// entries under P, named relative to it, with the path's stat header.
func (s *Server) archiveRead(r *http.Request) *reply {
	src := r.URL.Query().Get("path")
	if src == "" {
		return errReply(http.StatusBadRequest, "path is required")
	}
	return s.withContainer(r, func(c *ctr) *reply {
		dir := strings.TrimSuffix(src, "/.")
		name, inside, ok := c.volumeAt(dir)
		if !ok {
			return errReply(http.StatusNotImplemented, "dockertest: archive reads outside a volume mount are not modelled")
		}
		v := s.volumes[name]
		if v == nil {
			return errReply(http.StatusNotFound, "Could not find the file %s in container %s", src, c.ID)
		}
		keys := make([]string, 0, len(v.files))
		for k := range v.files {
			if inside == "" || strings.HasPrefix(k, inside+"/") {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, k := range keys {
			e := v.files[k]
			h := e.Header
			h.Name = strings.TrimPrefix(strings.TrimPrefix(k, inside), "/")
			if h.Typeflag == tar.TypeDir && !strings.HasSuffix(h.Name, "/") {
				h.Name += "/"
			}
			if err := tw.WriteHeader(&h); err != nil {
				return errReply(http.StatusInternalServerError, "dockertest: %v", err)
			}
			_, _ = tw.Write(e.Content)
		}
		_ = tw.Close()
		stat, _ := json.Marshal(container.PathStat{Name: path.Base(dir), Mode: os.ModeDir | 0o755})
		return &reply{status: http.StatusOK, raw: buf.Bytes(), header: map[string]string{
			"X-Docker-Container-Path-Stat": base64.StdEncoding.EncodeToString(stat),
		}}
	})
}

func (s *Server) containerPause(r *http.Request) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		switch c.State {
		case StateRunning:
			s.setState(c, StatePaused, time.Now().UTC())
			return &reply{status: http.StatusNoContent}
		case StatePaused:
			return errReply(http.StatusConflict, "cannot pause container %s: container %s is already paused", r.PathValue("id"), c.ID)
		}
		return errReply(http.StatusConflict, "cannot pause container %s: container %s is not running", r.PathValue("id"), c.ID)
	})
}

func (s *Server) containerUnpause(r *http.Request) *reply {
	return s.withContainer(r, func(c *ctr) *reply {
		if c.State != StatePaused {
			return errReply(http.StatusConflict, "cannot unpause container %s: container %s is not paused", r.PathValue("id"), c.ID)
		}
		s.setState(c, StateRunning, time.Now().UTC())
		return &reply{status: http.StatusNoContent}
	})
}
