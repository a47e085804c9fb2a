package providers

import (
	"bytes"
	"encoding/json"
	"fmt"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providercontract"
)

// The projections are the machine-readable views of the registration
// table that tools outside Go read (the installer's choices, packaging):
// SpecificationContract and ArtifactCatalog. core/cmd/specification-contract
// and core/cmd/provider-artifacts write them under deploy/projections, and
// make verify-generated proves them fresh. Both are deterministic: kinds,
// operations and artifacts in sorted order, indented JSON, one trailing
// newline.

// ProjectionVersion is the format version of both projections.
const ProjectionVersion = 1

// SpecificationContract is the installer's projection: the shared field
// bounds of a deployment specification (sandbox/deployment_contract.go)
// and, per registered kind, its policies.
func SpecificationContract(r *Registry) ([]byte, error) {
	type bound struct {
		Min int64 `json:"min"`
		Max int64 `json:"max"`
	}
	type decision struct {
		State  string `json:"state"`
		Reason string `json:"reason,omitempty"`
	}
	type suspension struct {
		IdleSeconds      int64 `json:"idle_seconds"`
		RetentionSeconds int64 `json:"retention_seconds"`
	}
	type provider struct {
		Kind         string              `json:"kind"`
		Mode         string              `json:"mode"`
		Credential   string              `json:"credential"`
		PublicOrigin string              `json:"public_origin"`
		Discovery    decision            `json:"configuration_discovery"`
		RuntimeInput decision            `json:"runtime_input"`
		Suspension   *suspension         `json:"suspension_defaults,omitempty"`
		Operations   map[string]decision `json:"operations"`
	}
	doc := struct {
		Version   int              `json:"version"`
		Bounds    map[string]bound `json:"bounds"`
		Providers []provider       `json:"providers"`
	}{
		Version: ProjectionVersion,
		Bounds: map[string]bound{
			"cpu_millis":                   {sandbox.MinCPUMillis, sandbox.MaxCPUMillis},
			"memory_bytes":                 {sandbox.MinMemoryBytes, sandbox.MaxMemoryBytes},
			"disk_bytes":                   {sandbox.MinDiskBytes, sandbox.MaxDiskBytes},
			"max_active":                   {sandbox.MinMaxActive, sandbox.MaxMaxActive},
			"max_retained":                 {0, sandbox.MaxMaxRetained},
			"suspension.idle_seconds":      {int64(sandbox.MinSuspendIdle.Seconds()), int64(sandbox.MaxSuspendIdle.Seconds())},
			"suspension.retention_seconds": {int64(sandbox.MinRetention.Seconds()), int64(sandbox.MaxRetention.Seconds())},
		},
	}
	dec := func(d providercontract.Decision) decision {
		return decision{State: d.State.String(), Reason: string(d.Reason)}
	}
	for _, kind := range r.Kinds() {
		reg, err := r.Lookup(kind)
		if err != nil {
			return nil, err
		}
		req := reg.Configuration.Requirements()
		p := provider{
			Kind: kind, Mode: modeName(reg.Mode),
			Credential: requirementName(req.Credential), PublicOrigin: requirementName(req.PublicOrigin),
			Discovery:  dec(req.Discovery),
			Operations: map[string]decision{},
		}
		if reg.RuntimeInput.AcceptsPinnedRuntime {
			p.RuntimeInput = decision{State: "accepted"}
		} else {
			p.RuntimeInput = decision{State: "rejected", Reason: string(reg.RuntimeInput.RejectReason)}
		}
		if !reg.Suspension.IsZero() {
			p.Suspension = &suspension{int64(reg.Suspension.Idle.Seconds()), int64(reg.Suspension.Retention.Seconds())}
		}
		for op, d := range reg.Operations {
			p.Operations[string(op)] = dec(d)
		}
		doc.Providers = append(doc.Providers, p)
	}
	return marshalProjection(doc)
}

// ArtifactCatalog is the distribution projection: every file each
// adapter needs distributed (a direct one's too: a vendor template's
// inputs), with its logical path, release filename suffix and
// installation role, per kind. Packaging and node installation read it
// instead of naming a provider.
func ArtifactCatalog(r *Registry) ([]byte, error) {
	type artifact struct {
		Kind   string `json:"kind"`
		Path   string `json:"path"`
		Suffix string `json:"suffix"`
		Role   string `json:"role"`
	}
	doc := struct {
		Version   int        `json:"version"`
		Artifacts []artifact `json:"artifacts"`
	}{Version: ProjectionVersion, Artifacts: []artifact{}}
	for _, kind := range r.Kinds() {
		reg, err := r.Lookup(kind)
		if err != nil {
			return nil, err
		}
		for _, a := range reg.Artifacts {
			doc.Artifacts = append(doc.Artifacts, artifact{Kind: kind, Path: a.Path, Suffix: a.Suffix, Role: string(a.Role)})
		}
	}
	return marshalProjection(doc)
}

func marshalProjection(doc any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil { // maps are written in key order
		return nil, fmt.Errorf("projection: %w", err)
	}
	return buf.Bytes(), nil
}

func modeName(m Mode) string {
	switch m {
	case ModeNodes:
		return "nodes"
	case ModeDirect:
		return "direct"
	}
	return "unset"
}

func requirementName(r sandbox.Requirement) string {
	switch r {
	case sandbox.Required:
		return "required"
	case sandbox.NotRequired:
		return "not_required"
	}
	return "unset"
}
