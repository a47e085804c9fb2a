package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/providercontract"
)

// The ownership metadata every sandbox of the adapter carries (DESIGN.md
// allows berth_* only). Values are canonical UUIDs.
const (
	MetaInstallation = "berth_installation"
	MetaTenant       = "berth_tenant"
	MetaEnvironment  = "berth_environment"
	MetaAllocation   = "berth_allocation"
)

// The reason codes of the unsupported operations.
const (
	ReasonNoCheckpoint  providercontract.ReasonCode = "e2b_no_checkpoint"
	ReasonNoObservation providercontract.ReasonCode = "e2b_no_observation"
	ReasonNoDiscovery   providercontract.ReasonCode = "e2b_no_discovery"
)

// The adapter's time bounds.
const (
	// CreateGrace is how long a Create or Kill whose caller gave up may go
	// on (its deadline still binds it), keeping the Reference's turn.
	CreateGrace = 5 * time.Second
	// SettleAfter is the settlement bound of an unknown Create: a POST
	// that began this long ago can no longer commit (doc.go).
	SettleAfter = 120 * time.Second
	// killGrace bounds the best-effort SIGKILL of a command whose caller
	// gave up.
	killGrace = 2 * time.Second
)

// Operations is the adapter's one declaration, shared by its instances
// and its registration: the five required operations and credential
// verification supported; checkpoints, observation and discovery not.
func Operations() providercontract.Operations {
	s := providercontract.Supported()
	return sandbox.WithoutCheckpoints(providercontract.Operations{
		sandbox.OpCreate: s, sandbox.OpGetInfo: s, sandbox.OpRenew: s, sandbox.OpKill: s, sandbox.OpRunCommand: s,
		sandbox.OpObserve:           providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpObserveBatch:      providercontract.Unsupported(ReasonNoObservation),
		sandbox.OpDiscoverSelection: providercontract.Unsupported(ReasonNoDiscovery),
		sandbox.OpVerifyCredential:  s,
	}, ReasonNoCheckpoint)
}

// The adapter's errors: errdefs classes with fixed text, never E2B's
// (whose bodies are never read into an error), an id, a URL or a key.
var (
	errCredentialRejected = errdefs.Refuse(errdefs.ErrFailedPrecondition, "credential_rejected",
		"E2B rejected the deployment's API key: replace the credential")
	errOtherTeam = errdefs.Refuse(errdefs.ErrFailedPrecondition, "credential_other_namespace",
		"the new API key cannot see this installation's E2B sandboxes (another team?): nothing was replaced")
	errRateLimited = errdefs.Refuse(errdefs.ErrFailedPrecondition, "vendor_rate_limited",
		"E2B refused the sandbox for now (rate or concurrency limit): nothing was created; retry later")
	errClosed = errdefs.Refuse(errdefs.ErrFenced, "adapter_closed",
		"the E2B adapter of this generation is closed: nothing was sent")
	errForeign = fmt.Errorf("e2b: a sandbox listed for the allocation carries another owner's berth_* metadata, nothing was touched: %w",
		errdefs.ErrOwnership)
	errDuplicate = fmt.Errorf("e2b: more than one sandbox carries the allocation's metadata, nothing was touched: %w",
		errdefs.ErrOwnership)
	errExists         = fmt.Errorf("e2b create: a sandbox of the allocation exists: %w", errdefs.ErrExists)
	errNotFound       = fmt.Errorf("e2b: no sandbox of the allocation is listed: %w", errdefs.ErrNotFound)
	errUnsettled      = fmt.Errorf("e2b: no sandbox of the allocation is listed, and its create may still commit: %w", errdefs.ErrNotFound)
	errUnavailable    = fmt.Errorf("e2b: E2B did not answer the read: %w", errdefs.ErrObservationUnavailable)
	errCreateRefused  = fmt.Errorf("e2b create: E2B refused the request (template or settings): %w", errdefs.ErrInvalid)
	errCreateUnknown  = fmt.Errorf("e2b create: no complete answer from E2B: %w", errdefs.ErrComputeUnconfirmed)
	errCreateNotRead  = fmt.Errorf("e2b create: the allocation's listing failed, nothing was created: %w", errdefs.ErrObservationUnavailable)
	errCreateAnswer   = fmt.Errorf("e2b create: E2B's answer names no usable sandbox: %w", errdefs.ErrComputeUnconfirmed)
	errReceipt        = fmt.Errorf("e2b create: the create receipt could not be written, nothing was sent: %w", errdefs.ErrObservationUnavailable)
	errBootstrap      = fmt.Errorf("e2b create: the Runtime bootstrap did not complete in the sandbox: %w", errdefs.ErrComputeUnconfirmed)
	errRenewUnknown   = fmt.Errorf("e2b renew: no complete answer from E2B: %w", errdefs.ErrComputeUnconfirmed)
	errKillUnknown    = fmt.Errorf("e2b kill: no confirmed removal from E2B: %w", errdefs.ErrComputeUnconfirmed)
	errCommandUnknown = fmt.Errorf("e2b run: no complete answer from envd: %w", errdefs.ErrCommandUnconfirmed)
	errNotRunning     = fmt.Errorf("e2b run: the allocation's sandbox is not running: %w", errdefs.ErrNotFound)
	errInstallation   = errdefs.Invalid("installation_id", "must be a canonical lowercase UUID")
	errStateDirectory = errdefs.Invalid("state_directory", "must be a canonical absolute path")
)

// Options construct a Provider. Registration's BuildDirect fills them
// from the stored configuration, the opened key and the process paths;
// tests fill them directly.
type Options struct {
	Config         Config
	InstallationID string
	// StateDirectory holds the create receipts (private, 0700): the
	// registration uses ProcessPaths.State/e2b.
	StateDirectory string
	// Now is the clock of the settlement rule; nil: time.Now.
	Now func() time.Time
	// Logger receives the adapter's few fixed events (never a key, token,
	// URL or E2B text); nil: none.
	Logger *slog.Logger
}

// Provider is the E2B adapter: one instance per generation Core serves,
// bound to its endpoints, key, installation, state directory and fence.
type Provider struct {
	// E2B has no Berth checkpoints (doc.go): every CheckpointProvider
	// method answers the declaration's UnsupportedError before any I/O.
	sandbox.CheckpointsUnsupported
	ops          providercontract.Operations
	c            *client
	template     string
	lease        time.Duration
	installation string
	receipts     string
	now          func() time.Time
	log          *slog.Logger
	fence        *sandbox.CallFence
	closed       atomic.Bool
}

var (
	_ sandbox.SandboxProvider    = (*Provider)(nil)
	_ sandbox.CredentialVerifier = (*Provider)(nil)
)

// New returns an adapter over opts. It sends nothing and creates only
// the private receipt directory.
func New(opts Options) (*Provider, error) {
	cfg, err := opts.Config.check()
	if err != nil {
		return nil, err
	}
	if cfg.key.Len() == 0 {
		return nil, errCredential
	}
	if !sandbox.CanonicalUUID(opts.InstallationID) {
		return nil, errInstallation
	}
	if opts.StateDirectory == "" || !filepath.IsAbs(opts.StateDirectory) || filepath.Clean(opts.StateDirectory) != opts.StateDirectory {
		return nil, errStateDirectory
	}
	receipts := filepath.Join(opts.StateDirectory, "creates")
	if err := privateDir(receipts); err != nil {
		return nil, errStateDirectory
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ops := Operations()
	return &Provider{
		CheckpointsUnsupported: sandbox.CheckpointsUnsupported{Ops: ops},
		ops:                    ops,
		c:                      newClient(cfg.APIURL, cfg.SandboxURL, cfg.key),
		template:               cfg.Template,
		lease:                  cfg.Lease,
		installation:           opts.InstallationID,
		receipts:               receipts,
		now:                    now,
		log:                    log,
		fence:                  &sandbox.CallFence{},
	}, nil
}

// Unconfigured returns an adapter with no client: for the contract
// suite's unsupported-operation checks, which must not reach anything.
func Unconfigured() *Provider {
	ops := Operations()
	return &Provider{CheckpointsUnsupported: sandbox.CheckpointsUnsupported{Ops: ops}, ops: ops, fence: &sandbox.CallFence{}}
}

// Fence returns the adapter's one CallFence (DirectBuilt.Fence).
func (p *Provider) Fence() *sandbox.CallFence { return p.fence }

// ProviderOperations returns a copy of the declaration.
func (p *Provider) ProviderOperations() providercontract.Operations { return p.ops.Clone() }

// Metadata is the berth_* metadata of installation's sandbox for ref:
// what Create writes and every other call requires, key for key.
func Metadata(installation string, ref sandbox.Reference) map[string]string {
	return map[string]string{
		MetaInstallation: installation,
		MetaTenant:       ref.TenantID,
		MetaEnvironment:  ref.EnvironmentID,
		MetaAllocation:   ref.AllocationID,
	}
}

// owns re-checks every berth_* key of a listed or read sandbox.
func (p *Provider) owns(ref sandbox.Reference, s sandboxJSON) bool {
	if !idPattern.MatchString(s.SandboxID) {
		return false
	}
	for k, want := range Metadata(p.installation, ref) {
		if s.Metadata[k] != want {
			return false
		}
	}
	return true
}

// find lists the sandboxes carrying ref's allocation id (the one unique
// key, so a sandbox with the same allocation and another owner is seen)
// and splits them into owned (every key equal) and foreign.
func (p *Provider) find(ctx context.Context, ref sandbox.Reference) (owned []sandboxJSON, foreign bool, err error) {
	listed, err := p.c.list(ctx, map[string]string{MetaAllocation: ref.AllocationID}, pageLimit)
	if err != nil {
		return nil, false, err
	}
	for _, s := range listed {
		if p.owns(ref, s) {
			owned = append(owned, s)
		} else {
			foreign = true
		}
	}
	return owned, foreign, nil
}

// one is the allocation's one owned sandbox, or an error: a rejected
// key, no listing, a foreign or duplicate sandbox, or ErrNotFound.
func (p *Provider) one(ctx context.Context, ref sandbox.Reference) (sandboxJSON, error) {
	owned, foreign, err := p.find(ctx, ref)
	switch {
	case err != nil:
		return sandboxJSON{}, readErr(err)
	case foreign:
		return sandboxJSON{}, errForeign
	case len(owned) > 1:
		return sandboxJSON{}, errDuplicate
	case len(owned) == 0:
		return sandboxJSON{}, errNotFound
	}
	return owned[0], nil
}

// detail reads an owned sandbox by the id its listing gave and checks
// its metadata again (never trusting a bare id).
func (p *Provider) detail(ctx context.Context, ref sandbox.Reference, id string) (sandboxJSON, error) {
	s, err := p.c.get(ctx, id)
	switch {
	case statusOf(err) == 404:
		return sandboxJSON{}, errNotFound
	case err != nil:
		return sandboxJSON{}, readErr(err)
	case s.SandboxID != id || !p.owns(ref, s):
		return sandboxJSON{}, errForeign
	}
	return s, nil
}

// readErr maps a failed read: a rejected key, or no observation now.
func readErr(err error) error {
	switch statusOf(err) {
	case 401, 403:
		return errCredentialRejected
	}
	return errUnavailable
}

// fenced runs one native call about ref under its turn in the fence, the
// turn held until the call returned (every HTTP exchange of the call has
// ended by then: the client closes each connection before returning).
func (p *Provider) fenced(ctx context.Context, ref sandbox.Reference, call func(context.Context) error) error {
	if p.closed.Load() || p.c == nil {
		return errClosed
	}
	done, err := p.fence.Enter(ctx, ref)
	if err != nil {
		return err
	}
	defer done()
	return call(ctx)
}

func isContext(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// state maps E2B's state: running or paused (never resumed).
func state(s sandboxJSON) sandbox.State {
	if s.State == "paused" {
		return sandbox.StatePaused
	}
	return sandbox.StateRunning
}

// receipt is the explicit creation-absence receipt for ref.
func receipt(ref sandbox.Reference) sandbox.Info {
	return sandbox.Info{Reference: ref, State: sandbox.StateAbsent, CreateSettled: true}
}

// Observe is unsupported.
func (p *Provider) Observe(context.Context, sandbox.Reference) (sandbox.Observation, error) {
	return sandbox.Observation{}, p.ops.Check(sandbox.OpObserve)
}

// ObserveBatch is unsupported.
func (p *Provider) ObserveBatch(context.Context, []sandbox.Reference) ([]sandbox.ObservationResult, error) {
	return nil, p.ops.Check(sandbox.OpObserveBatch)
}

// DiscoverSelection is unsupported.
func (p *Provider) DiscoverSelection(context.Context, sandbox.NativeConfiguration) (sandbox.NativeConfiguration, error) {
	return nil, p.ops.Check(sandbox.OpDiscoverSelection)
}

// close makes every later call answer errClosed without reaching E2B.
// Core calls it after excluding the fence.
func (p *Provider) close() error {
	p.closed.Store(true)
	return nil
}
