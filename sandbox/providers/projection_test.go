package providers_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"
)

// TestSpecificationContractProjectsTheTable: the installer's projection
// carries the shared bounds as the code has them and every registered
// kind's policies and complete operation declaration, and renders the
// same bytes every time.
func TestSpecificationContractProjectsTheTable(t *testing.T) {
	reg, err := providers.Default()
	if err != nil {
		t.Fatal(err)
	}
	out, err := providers.SpecificationContract(reg)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := providers.SpecificationContract(reg)
	if !bytes.Equal(out, again) {
		t.Fatal("the projection is not deterministic")
	}
	var doc struct {
		Version int `json:"version"`
		Bounds  map[string]struct {
			Min, Max int64
		} `json:"bounds"`
		Providers []struct {
			Kind       string `json:"kind"`
			Mode       string `json:"mode"`
			Operations map[string]struct {
				State string `json:"state"`
			} `json:"operations"`
			Suspension *struct {
				IdleSeconds int64 `json:"idle_seconds"`
			} `json:"suspension_defaults"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if b := doc.Bounds["memory_bytes"]; doc.Version != providers.ProjectionVersion || b.Min != sandbox.MinMemoryBytes || b.Max != sandbox.MaxMemoryBytes {
		t.Fatalf("bounds %+v", doc.Bounds)
	}
	if len(doc.Providers) != len(reg.Kinds()) || doc.Providers[0].Kind != "docker" || doc.Providers[0].Mode != "nodes" {
		t.Fatalf("providers %+v", doc.Providers)
	}
	d, _ := reg.Lookup("docker")
	p := doc.Providers[0]
	if len(p.Operations) != len(d.Operations) || p.Operations["Create"].State != "supported" ||
		p.Suspension == nil || p.Suspension.IdleSeconds != int64(d.Suspension.Idle.Seconds()) {
		t.Fatalf("docker's policies %+v", p)
	}
}

// TestArtifactCatalogListsEachAdaptersFiles: the distribution projection
// lists exactly the registered artifacts.
func TestArtifactCatalogListsEachAdaptersFiles(t *testing.T) {
	reg, err := providers.Default()
	if err != nil {
		t.Fatal(err)
	}
	out, err := providers.ArtifactCatalog(reg)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Artifacts []struct{ Kind, Path, Suffix, Role string } `json:"artifacts"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	type entry struct{ Kind, Path, Suffix, Role string }
	var want []entry
	for _, kind := range reg.Kinds() {
		r, err := reg.Lookup(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range r.Artifacts {
			want = append(want, entry{kind, a.Path, a.Suffix, string(a.Role)})
		}
	}
	if len(doc.Artifacts) != len(want) || len(want) < len(reg.Kinds()) {
		t.Fatalf("%d artifacts, want %d", len(doc.Artifacts), len(want))
	}
	for i, a := range want {
		if got := entry(doc.Artifacts[i]); got != a {
			t.Fatalf("artifact %d: %+v, want %+v", i, got, a)
		}
	}
}
