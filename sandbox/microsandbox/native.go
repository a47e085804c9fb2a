package microsandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// The msb statuses the adapter reads (msb 0.6.18's SandboxStatus, as
// `msb inspect` and `msb list` print them).
const (
	statusRunning  = "Running"
	statusDraining = "Draining"
	statusPaused   = "Paused"
	statusStopped  = "Stopped"
	statusCrashed  = "Crashed"
)

// notFoundPrefix starts msb's stderr when inspect names no sandbox (exit
// code 1); any other failure is not an absence.
var notFoundPrefix = []byte("error: sandbox not found: ")

// maxJSON bounds a JSON answer the adapter decodes.
const maxJSON = 1 << 20

// record is the part of `msb inspect NAME --format json` the adapter reads.
type record struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Config struct {
		Labels         map[string]string `json:"labels"`
		ManifestDigest string            `json:"manifest_digest"`
		Resources      struct {
			CPUs      int64 `json:"cpus"`
			MemoryMiB int64 `json:"memory_mib"`
		} `json:"resources"`
		Image struct {
			OCI *struct {
				Reference string `json:"reference"`
				RootDisk  struct {
					SizeMiB int64 `json:"size_mib"`
				} `json:"root_disk"`
			} `json:"Oci"`
		} `json:"image"`
	} `json:"config"`
}

// listEntry is one element of `msb list --format json`.
type listEntry struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// metrics is the part of `msb metrics NAME --format json` Observe reads.
type metrics struct {
	Name             string `json:"name"`
	VCPUTimeNanos    uint64 `json:"vcpu_time_ns"`
	MemoryBytes      uint64 `json:"memory_bytes"`
	MemoryLimitBytes uint64 `json:"memory_limit_bytes"`
}

// ran classifies one finished msb call: err is the Runner's error.
type ran int

const (
	ranOK      ran = iota // exited 0
	ranFailed             // exited by itself with a nonzero code: msb answered
	ranUnknown            // no answer: signalled, or the call's context ended
	ranNotRun             // msb did not start: nothing was asked
)

func classify(res Result, err error) ran {
	switch {
	case errors.Is(err, ErrNotExited):
		return ranUnknown
	case err != nil:
		return ranNotRun
	case res.ExitCode == 0:
		return ranOK
	case res.ExitCode < 0:
		return ranUnknown
	}
	return ranFailed
}

// inspect reads the sandbox named name, unchecked: ErrNotFound when msb
// says there is none, ErrObservationUnavailable for any other failure.
// Every caller checks the labels it requires before it trusts it.
func (p *Provider) inspect(ctx context.Context, name string) (record, error) {
	res, err := p.msb.Run(ctx, Invocation{Args: []string{"inspect", name, "--format", "json"}, Limit: maxJSON})
	switch classify(res, err) {
	case ranOK:
	case ranFailed:
		if res.ExitCode == 1 && bytes.HasPrefix(res.Stderr, notFoundPrefix) {
			return record{}, errdefs.ErrNotFound
		}
		return record{}, errdefs.ErrObservationUnavailable
	default:
		return record{}, errdefs.ErrObservationUnavailable
	}
	var rec record
	if res.Truncated || json.Unmarshal(res.Stdout, &rec) != nil || rec.Name != name {
		return record{}, errdefs.ErrObservationUnavailable
	}
	return rec, nil
}

// inspectOwned reads ref's sandbox and checks every ownership label:
// ErrNotFound, ErrOwnership (a foreign sandbox holds ref's name) or
// ErrObservationUnavailable.
func (p *Provider) inspectOwned(ctx context.Context, ref sandbox.Reference) (record, error) {
	rec, err := p.inspect(ctx, p.Name(ref))
	if err != nil {
		return record{}, err
	}
	if !p.owns(ref, rec.Config.Labels) {
		return record{}, errdefs.ErrOwnership
	}
	return rec, nil
}

// labelArgs are ref's ownership labels as msb selectors, in a fixed order.
func (p *Provider) labelArgs(ref sandbox.Reference) []string {
	labels := p.Labels(ref)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, "--label", k+"="+labels[k])
	}
	return args
}

// listOwned lists the sandboxes carrying every ownership label of ref
// (msb ANDs the selectors), under any name.
func (p *Provider) listOwned(ctx context.Context, ref sandbox.Reference) ([]listEntry, error) {
	args := append([]string{"list"}, p.labelArgs(ref)...)
	res, err := p.msb.Run(ctx, Invocation{Args: append(args, "--format", "json"), Limit: maxJSON})
	if classify(res, err) != ranOK {
		return nil, errdefs.ErrObservationUnavailable
	}
	var entries []listEntry
	if res.Truncated || json.Unmarshal(res.Stdout, &entries) != nil {
		return nil, errdefs.ErrObservationUnavailable
	}
	return entries, nil
}

// removeOwned asks msb to stop and remove every sandbox carrying all of
// ref's ownership labels: selected by the labels, never by a name, so a
// foreign sandbox is never touched. Success is only an answer; Kill
// confirms absence by listing again.
func (p *Provider) removeOwned(ctx context.Context, ref sandbox.Reference) error {
	args := append([]string{"remove", "--force", "-q"}, p.labelArgs(ref)...)
	res, err := p.msb.Run(ctx, Invocation{Args: args})
	if classify(res, err) != ranOK {
		return fmt.Errorf("remove sandbox: %w", errdefs.ErrComputeUnconfirmed)
	}
	return nil
}

// state maps an msb status. Draining (shutting down) is not running.
func state(status string) (sandbox.State, bool) {
	switch status {
	case statusRunning:
		return sandbox.StateRunning, true
	case statusPaused:
		return sandbox.StatePaused, true
	case statusStopped, statusCrashed, statusDraining:
		return sandbox.StateStopped, true
	}
	return "", false
}

// info is what GetInfo reports of ref's owned record. The native identity
// is the sandbox name (msb shows no other); a running record has a
// completed bootstrap and a settled Create (the bootstrap files are in
// place before msb is asked, and msb runs a sandbox only after its create
// inserted it), unless a Create of this process for it is still running
// (its msb call may still stop it; no other process's call can outlive
// that process: doc.go).
func (p *Provider) info(ref sandbox.Reference, rec record) (sandbox.Info, error) {
	st, ok := state(rec.Status)
	if !ok {
		return sandbox.Info{}, errdefs.ErrObservationUnavailable
	}
	running := st == sandbox.StateRunning && !p.isCreating(rec.Name)
	return sandbox.Info{
		Reference: ref, ProviderID: rec.Name, State: st,
		BootstrapComplete: running, CreateSettled: running,
	}, nil
}
