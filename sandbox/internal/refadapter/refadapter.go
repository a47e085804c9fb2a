package refadapter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"berth.dev/runtimebootstrap"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/internal/refnative"
	"berth.dev/sandbox/nodeconfig"
	"berth.dev/sandbox/providercontract"
)

// Kind is the reference adapter's provider kind.
const Kind = "reference"

// The ownership labels.
const (
	LabelInstallation = "io.berth.installation"
	LabelTenant       = "io.berth.tenant"
	LabelEnvironment  = "io.berth.environment"
	LabelAllocation   = "io.berth.allocation"
)

const (
	reasonNoCheckpoint = providercontract.ReasonCode("reference_no_checkpoint")
	reasonNoBatch      = providercontract.ReasonCode("reference_no_native_batch")
)

// Operations is the adapter's one declaration, shared by its instances and
// its registration.
func Operations() providercontract.Operations {
	s, u := providercontract.Supported(), providercontract.Unsupported
	return providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpInitial: u(reasonNoCheckpoint), sandbox.OpNewCompute: u(reasonNoCheckpoint),
		sandbox.OpGetCompute: u(reasonNoCheckpoint), sandbox.OpSuspend: u(reasonNoCheckpoint), sandbox.OpCapture: u(reasonNoCheckpoint), sandbox.OpCreateSeeded: u(reasonNoCheckpoint), sandbox.OpExportSnapshot: u(reasonNoCheckpoint), sandbox.OpImportSnapshot: u(reasonNoCheckpoint),
		sandbox.OpResume: u(reasonNoCheckpoint), sandbox.OpResumeCompute: u(reasonNoCheckpoint),
		sandbox.OpKillCompute: u(reasonNoCheckpoint), sandbox.OpDeleteSnapshot: u(reasonNoCheckpoint),
		sandbox.OpRunCommandCompute: u(reasonNoCheckpoint),
		sandbox.OpObserve:           s,
		sandbox.OpObserveBatch:      u(reasonNoBatch),
		sandbox.OpDiscoverSelection: u(nodeconfig.ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  u(nodeconfig.ReasonNoCredential),
	}
}

// Provider is the reference adapter.
type Provider struct {
	// The native service has no checkpoints: every CheckpointProvider
	// method is declared unsupported and answered before any native I/O.
	sandbox.CheckpointsUnsupported
	ops          providercontract.Operations
	endpoint     string
	installation string
	client       *http.Client
}

var _ sandbox.SandboxProvider = (*Provider)(nil)

// New returns an adapter for the native service at endpoint. With a nil
// client the adapter has no native client at all: only methods declared
// unsupported can be called.
func New(endpoint, installationID string, client *http.Client) *Provider {
	ops := Operations()
	return &Provider{CheckpointsUnsupported: sandbox.CheckpointsUnsupported{Ops: ops}, ops: ops, endpoint: endpoint, installation: installationID, client: client}
}

// NewClient returns the native HTTP client. Every call uses its own
// connection: net/http silently resends an idempotent request whose reused
// connection dropped, and the adapter, not its transport, decides every
// retry.
func NewClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// ProviderOperations returns the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Name is the deterministic native name of ref's resource.
func (p *Provider) Name(ref sandbox.Reference) string {
	sum := sha256.Sum256([]byte(p.installation + "\x00" + ref.TenantID + "\x00" + ref.EnvironmentID + "\x00" + ref.AllocationID))
	return "berth-" + hex.EncodeToString(sum[:12])
}

// Labels are the ownership labels of ref's resource.
func (p *Provider) Labels(ref sandbox.Reference) map[string]string {
	return map[string]string{
		LabelInstallation: p.installation,
		LabelTenant:       ref.TenantID,
		LabelEnvironment:  ref.EnvironmentID,
		LabelAllocation:   ref.AllocationID,
	}
}

func (p *Provider) owns(ref sandbox.Reference, labels map[string]string) bool {
	want := p.Labels(ref)
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// errTransport marks a call whose outcome is unknown: no answer arrived.
var errTransport = errors.New("no native answer")

// call performs one native request. A transport failure or cancellation
// returns errTransport and never the client's error text, which names
// endpoints and resources.
func (p *Provider) call(ctx context.Context, method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case []byte:
			rd = bytes.NewReader(b)
		default:
			data, err := json.Marshal(b)
			if err != nil {
				return 0, fmt.Errorf("encode request: %w", errdefs.ErrInvalid)
			}
			rd = bytes.NewReader(data)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, p.endpoint+path, rd)
	if err != nil {
		return 0, errdefs.Invalid("endpoint", "cannot form a request")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, errTransport
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
			return resp.StatusCode, errTransport
		}
	}
	return resp.StatusCode, nil
}

func resourcePath(name string, suffix string) string {
	return "/v1/resources/" + url.PathEscape(name) + suffix
}

// inspect reads ref's resource and checks its ownership. It returns
// ErrNotFound, ErrOwnership, or errTransport.
func (p *Provider) inspect(ctx context.Context, ref sandbox.Reference) (refnative.Resource, error) {
	var res refnative.Resource
	status, err := p.call(ctx, http.MethodGet, resourcePath(p.Name(ref), ""), nil, &res)
	switch {
	case err != nil:
		return res, err
	case status == http.StatusNotFound:
		return res, errdefs.ErrNotFound
	case status != http.StatusOK:
		return res, errTransport
	case !p.owns(ref, res.Labels):
		return refnative.Resource{}, errdefs.ErrOwnership
	}
	return res, nil
}

func (p *Provider) info(ref sandbox.Reference, res refnative.Resource) sandbox.Info {
	info := sandbox.Info{Reference: ref, ProviderID: res.ID, BootstrapComplete: res.BootstrapDone}
	switch res.State {
	case "running":
		info.State = sandbox.StateRunning
	case "created":
		info.State = sandbox.StateCreated
	default:
		info.State = sandbox.StateStopped
	}
	// Creation is settled once the bootstrap's final step (start) is done.
	info.CreateSettled = res.BootstrapDone && res.State == "running"
	return info
}

// Create creates and bootstraps ref's resource. It never reuses an existing
// resource, never retries a step and never cleans up after a failure: a
// failure after the resource exists returns the Reference and native id
// with ErrComputeUnconfirmed, for owned cleanup by Kill.
func (p *Provider) Create(ctx context.Context, req sandbox.CreateRequest) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpCreate); err != nil {
		return sandbox.Info{}, err
	}
	if err := req.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	ref := req.Reference
	switch _, err := p.inspect(ctx, ref); {
	case err == nil:
		return sandbox.Info{}, fmt.Errorf("create: %w", errdefs.ErrExists)
	case errors.Is(err, errdefs.ErrOwnership):
		return sandbox.Info{}, fmt.Errorf("create: %w", err)
	case !errors.Is(err, errdefs.ErrNotFound):
		return sandbox.Info{}, fmt.Errorf("create: check existing resource: %w", errdefs.ErrObservationUnavailable)
	}
	var res refnative.Resource
	status, err := p.call(ctx, http.MethodPost, "/v1/resources",
		refnative.CreateBody{Name: p.Name(ref), Labels: p.Labels(ref)}, &res)
	switch {
	case err != nil || status/100 == 5:
		return sandbox.Info{Reference: ref}, fmt.Errorf("create resource: %w", errdefs.ErrComputeUnconfirmed)
	case status == http.StatusConflict:
		return sandbox.Info{}, fmt.Errorf("create resource: %w", errdefs.ErrExists)
	case status != http.StatusCreated:
		return sandbox.Info{}, fmt.Errorf("create resource: %w", errdefs.ErrInvalid)
	}
	partial := sandbox.Info{Reference: ref, ProviderID: res.ID, State: sandbox.StateCreated}
	file, err := runtimebootstrap.Encode(req.Bootstrap)
	if err != nil {
		return partial, fmt.Errorf("encode bootstrap: %w", errdefs.ErrComputeUnconfirmed)
	}
	for _, step := range []struct {
		method, suffix string
		body           any
	}{
		{http.MethodPut, "/bootstrap", file},
		{http.MethodPost, "/start", nil},
	} {
		status, err := p.call(ctx, step.method, resourcePath(p.Name(ref), step.suffix), step.body, nil)
		if err != nil || status != http.StatusNoContent {
			return partial, fmt.Errorf("bootstrap resource: %w", errdefs.ErrComputeUnconfirmed)
		}
	}
	return sandbox.Info{
		Reference: ref, ProviderID: res.ID, State: sandbox.StateRunning,
		BootstrapComplete: true, CreateSettled: true,
	}, nil
}

// GetInfo observes ref's resource.
func (p *Provider) GetInfo(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpGetInfo); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	res, err := p.inspect(ctx, ref)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("get info: %w", readErr(err))
	}
	return p.info(ref, res), nil
}

// Renew only observes: the native service has no lease.
func (p *Provider) Renew(ctx context.Context, ref sandbox.Reference) (sandbox.Info, error) {
	if err := p.ops.Check(sandbox.OpRenew); err != nil {
		return sandbox.Info{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	res, err := p.inspect(ctx, ref)
	if err != nil {
		// Like any lease mutation, a Renew without an answer has an unknown
		// outcome.
		if errors.Is(err, errTransport) {
			return sandbox.Info{}, fmt.Errorf("renew: %w", errdefs.ErrComputeUnconfirmed)
		}
		return sandbox.Info{}, fmt.Errorf("renew: %w", err)
	}
	return p.info(ref, res), nil
}

// readErr maps an inspect failure of a read-only operation.
func readErr(err error) error {
	if errors.Is(err, errTransport) {
		return errdefs.ErrObservationUnavailable
	}
	return err
}

// Kill checks ownership, removes ref's resource and confirms its absence.
// Confirmed absence at the start succeeds.
func (p *Provider) Kill(ctx context.Context, req sandbox.KillRequest) error {
	if err := p.ops.Check(sandbox.OpKill); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return err
	}
	ref := req.Reference
	switch _, err := p.inspect(ctx, ref); {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	case errors.Is(err, errdefs.ErrOwnership):
		return fmt.Errorf("kill: %w", err)
	case err != nil:
		return fmt.Errorf("kill: inspect: %w", errdefs.ErrComputeUnconfirmed)
	}
	status, err := p.call(ctx, http.MethodDelete, resourcePath(p.Name(ref), ""), nil, nil)
	if err != nil || (status != http.StatusNoContent && status != http.StatusNotFound) {
		return fmt.Errorf("kill: remove: %w", errdefs.ErrComputeUnconfirmed)
	}
	switch _, err := p.inspect(ctx, ref); {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	default:
		return fmt.Errorf("kill: confirm absence: %w", errdefs.ErrComputeUnconfirmed)
	}
}

// RunCommand runs cmd in ref's resource. Without a native answer the
// command's completion is unconfirmed; it is never resent.
func (p *Provider) RunCommand(ctx context.Context, ref sandbox.Reference, cmd sandbox.Command) (sandbox.CommandResult, error) {
	if err := p.ops.Check(sandbox.OpRunCommand); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.CommandResult{}, err
	}
	if _, err := p.inspect(ctx, ref); err != nil {
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", readErr(err))
	}
	var out refnative.ExecResult
	status, err := p.call(ctx, http.MethodPost, resourcePath(p.Name(ref), "/exec"),
		refnative.ExecBody{Args: cmd.Args, Stdin: cmd.Stdin}, &out)
	switch {
	case err != nil || status/100 == 5:
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrCommandUnconfirmed)
	case status == http.StatusConflict:
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrRuntimeNotRunning)
	case status != http.StatusOK:
		return sandbox.CommandResult{}, fmt.Errorf("run command: %w", errdefs.ErrInvalid)
	}
	limit := cmd.Limit()
	res := sandbox.CommandResult{ExitCode: out.ExitCode}
	res.Stdout, res.StdoutTruncated = bound(out.Stdout, limit)
	res.Stderr, res.StderrTruncated = bound(out.Stderr, limit)
	return res, nil
}

func bound(b []byte, limit int) ([]byte, bool) {
	if len(b) > limit {
		return b[:limit], true
	}
	return b, false
}

// Observe reads ref's resource usage after checking ownership.
func (p *Provider) Observe(ctx context.Context, ref sandbox.Reference) (sandbox.Observation, error) {
	if err := p.ops.Check(sandbox.OpObserve); err != nil {
		return sandbox.Observation{}, err
	}
	if err := ref.Validate(); err != nil {
		return sandbox.Observation{}, err
	}
	if _, err := p.inspect(ctx, ref); err != nil {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", readErr(err))
	}
	var st refnative.Stats
	status, err := p.call(ctx, http.MethodGet, resourcePath(p.Name(ref), "/stats"), nil, &st)
	if err != nil || status != http.StatusOK {
		return sandbox.Observation{}, fmt.Errorf("observe: %w", errdefs.ErrObservationUnavailable)
	}
	return sandbox.Observation{
		Reference: ref, CPUUsageNanos: st.CPUNanos, MemoryBytes: st.MemoryBytes,
		MemoryLimitBytes: st.MemoryLimit, PIDs: st.PIDs,
	}, nil
}

// ObserveBatch is unsupported: the native service has no batch read.
func (p *Provider) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, p.ops.Check(sandbox.OpObserveBatch)
}

// DiscoverSelection is unsupported for a node provider.
func (p *Provider) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, p.ops.Check(sandbox.OpDiscoverSelection)
}

// VerifyCredential is unsupported: a node provider has no credential.
func (p *Provider) VerifyCredential(context.Context, sandbox.NativeConfiguration) error {
	return p.ops.Check(sandbox.OpVerifyCredential)
}
