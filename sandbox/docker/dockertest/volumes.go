package dockertest

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/volume"
)

var validVolumeName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

func noSuchVolume(name string) *reply {
	return errReply(http.StatusNotFound, "get %s: no such volume", name)
}

func (v *vol) api() volume.Volume {
	labels := maps.Clone(v.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	return volume.Volume{
		CreatedAt:  v.CreatedAt.Format(time.RFC3339),
		Driver:     v.Driver,
		Labels:     labels,
		Mountpoint: v.Mountpoint,
		Name:       v.Name,
		Options:    maps.Clone(v.Options),
		Scope:      "local",
	}
}

func (s *Server) volumeCreate(r *http.Request) *reply {
	var req volume.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		return errReply(http.StatusBadRequest, "invalid JSON: %v", err)
	}
	driver := req.Driver
	if driver == "" {
		driver = "local"
	}
	if driver != "local" {
		return errReply(http.StatusNotFound, "error looking up volume plugin %s: plugin %q not found", driver, driver)
	}
	name := req.Name
	if name == "" {
		name = newID()
	}
	if !validVolumeName.MatchString(name) {
		if len(name) == 1 {
			return errReply(http.StatusBadRequest, "volume name is too short, names should be at least two alphanumeric characters")
		}
		return errReply(http.StatusBadRequest, "%q includes invalid characters for a local volume name, only \"[a-zA-Z0-9][a-zA-Z0-9_.-]\" are allowed. If you intended to pass a host directory, use absolute path", name)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.volumes[name]; ok {
		// The engine answers an existing name with the existing volume,
		// unchanged: labels and options of the request are ignored.
		return jsonReply(http.StatusCreated, v.api())
	}
	v := newVol(name, driver, req.Labels, req.DriverOpts)
	s.volumes[name] = v
	return jsonReply(http.StatusCreated, v.api())
}

// volumeCreateLosingLabels is volume.create under FaultVolumeLabelsLost:
// the volume is made (when its name is free) without its labels, and the
// answer is the engine's 500.
func (s *Server) volumeCreateLosingLabels(r *http.Request) *reply {
	var req volume.CreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		return errReply(http.StatusBadRequest, "invalid JSON: %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.volumes[req.Name]; !ok && validVolumeName.MatchString(req.Name) {
		s.volumes[req.Name] = newVol(req.Name, "local", nil, nil)
	}
	return errReply(http.StatusInternalServerError, "create %s: write /var/lib/docker/volumes/metadata.db: no space left on device", req.Name)
}

func (s *Server) volumeInspect(r *http.Request) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[r.PathValue("name")]
	if !ok {
		return noSuchVolume(r.PathValue("name"))
	}
	return jsonReply(http.StatusOK, v.api())
}

func (s *Server) volumeRemove(r *http.Request) *reply {
	name := r.PathValue("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.volumes[name]; !ok {
		if boolValue(r.URL.Query(), "force") {
			// With force the engine reports no "not found".
			return &reply{status: http.StatusNoContent}
		}
		return noSuchVolume(name)
	}
	var users []string
	for _, c := range s.containers {
		if c.usesVolume(name) {
			users = append(users, c.ID)
		}
	}
	if len(users) > 0 {
		slices.Sort(users)
		return errReply(http.StatusConflict, "remove %s: volume is in use - [%s]", name, strings.Join(users, ", "))
	}
	delete(s.volumes, name)
	return &reply{status: http.StatusNoContent}
}

func (s *Server) volumeList(r *http.Request) *reply {
	f, err := parseFilters(r.URL.Query().Get("filters"))
	if err != nil {
		return errReply(http.StatusBadRequest, "%v", err)
	}
	if err := f.validate("label", "name", "driver", "dangling"); err != nil {
		return errReply(http.StatusBadRequest, "%v", err)
	}
	var dangling *bool
	for _, d := range f["dangling"] {
		var b bool
		switch strings.ToLower(d) {
		case "true", "1":
			b = true
		case "false", "0":
		default:
			return errReply(http.StatusBadRequest, "invalid filter 'dangling=%s'", d)
		}
		dangling = &b
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	out := volume.ListResponse{Volumes: []volume.Volume{}}
	names := slices.Sorted(maps.Keys(s.volumes))
	for _, name := range names {
		v := s.volumes[name]
		if !matchLabels(f["label"], v.Labels) {
			continue
		}
		if d := f["driver"]; len(d) > 0 && !slices.Contains(d, v.Driver) {
			continue
		}
		if n := f["name"]; len(n) > 0 {
			ok, err := matchAnyRegexp(n, v.Name)
			if err != nil {
				return errReply(http.StatusBadRequest, "%v", err)
			}
			if !ok {
				continue
			}
		}
		if dangling != nil {
			used := false
			for _, c := range s.containers {
				used = used || c.usesVolume(name)
			}
			if used == *dangling {
				continue
			}
		}
		out.Volumes = append(out.Volumes, v.api())
	}
	return jsonReply(http.StatusOK, out)
}

// imageRoute serves GET /images/{name}/json, where name may hold slashes.
func (s *Server) imageRoute(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutSuffix(r.PathValue("rest"), "/json")
	if !ok || name == "" {
		s.unknown(w, r)
		return
	}
	s.handle(CallImageInspect, func(*http.Request) *reply { return s.imageInspect(name) })(w, r)
}

func (s *Server) imageInspect(name string) *reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	im := s.findImage(name)
	if im == nil {
		return errReply(http.StatusNotFound, "No such image: %s", name)
	}
	return jsonReply(http.StatusOK, image.InspectResponse{
		ID:           im.id,
		RepoTags:     slices.Clone(im.refs),
		RepoDigests:  []string{},
		Created:      "2025-01-01T00:00:00Z",
		Architecture: "amd64",
		Os:           "linux",
		Size:         10 << 20,
		RootFS:       image.RootFS{Type: "layers", Layers: []string{im.id}},
	})
}
