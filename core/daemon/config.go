package daemon

import (
	"path/filepath"
	"time"

	"berth.dev/sandbox"
	"berth.dev/sandbox/providers"
)

// Config is berth-core's configuration. A zero duration, or an empty
// MasterKeyFile, takes its default (defaults.go); addresses and the state
// directory have no default here, only on the command line.
type Config struct {
	DatabaseURL string
	// Migrate applies migrations at start-up; otherwise Core refuses a
	// schema it does not know.
	Migrate bool
	// PublicURL is the installation's public URL, used when the
	// installation is first claimed.
	PublicURL string
	// StateDir holds the admin token and, by default, the master key
	// (mode 0700).
	StateDir string
	// MasterKeyFile is the master key (default StateDir/master.key). Every
	// Core of an installation must hold the same key: the installation CA
	// key is sealed under it.
	MasterKeyFile string
	// AdminListen is the admin API's address; it must be loopback.
	AdminListen string
	// Listen is the public listener (enrollment) address.
	Listen string
	// RuntimeListen is the Runtime gateway's address (berth.runtime.v1),
	// which the installation's public URL names. It serves TLS: with
	// RuntimeTLSCertFile and RuntimeTLSKeyFile when given, otherwise with
	// a certificate issued from the installation CA for the public URL's
	// host (the CA reaches each Runtime beside its bootstrap file). Both
	// need an https public URL. Plaintext only with RuntimeInsecure. Empty
	// serves no gateway.
	RuntimeListen string
	// RuntimeTLSCertFile and RuntimeTLSKeyFile are the operator's PEM
	// certificate chain and key for the gateway (both or neither).
	RuntimeTLSCertFile, RuntimeTLSKeyFile string
	// RuntimeInsecure serves the gateway in plaintext: for an http public
	// URL on a private network (make up), or behind a TLS-terminating
	// proxy that the https public URL names.
	RuntimeInsecure bool
	// MetricsListen is the address of the Prometheus metrics endpoint
	// (GET /metrics, plain HTTP; metrics.go lists what it serves). Empty:
	// no metrics, no listener, and every instrument stays a no-op.
	MetricsListen string
	// RuntimeKeepalive is the gateway's keepalive interval
	// (DefaultRuntimeKeepalive when 0).
	RuntimeKeepalive time.Duration
	// LeaseTTL is the execution lease's lifetime, renewed at a third
	// (DefaultLeaseTTL when 0).
	LeaseTTL time.Duration
	// NodeInterval is how often node connections and lifecycle workers are
	// reconciled (DefaultNodeInterval when 0).
	NodeInterval time.Duration
	// LifecycleInterval is the wait between a node worker's passes
	// (DefaultLifecycleInterval when 0).
	LifecycleInterval time.Duration
	// CreateAbandonAfter is how long a Create's outcome may stay unknown
	// before the node's worker abandons it (DefaultCreateAbandonAfter when
	// 0; lifecycle.Config.CreateAbandonAfter).
	CreateAbandonAfter time.Duration
	// QuiesceTimeout is how long an armed suspension waits for the
	// Runtime's acknowledgement (DefaultQuiesceTimeout when 0).
	QuiesceTimeout time.Duration
	// RestoreAbandonAfter is how long a restore's outcome may stay unknown,
	// with the attempt's incarnation observed not running, before it is
	// abandoned (DefaultRestoreAbandonAfter when 0).
	RestoreAbandonAfter time.Duration
	// AuditRetention is how long audit events are kept, on the database
	// clock (DefaultAuditRetention when 0; at least audit.MinRetention).
	AuditRetention time.Duration
	// ResetMinTimeout is the shortest deadline StartReset accepts
	// (reset.MinTimeout when 0). Only tests of the whole daemon lower it,
	// to see a reset's deadline pass.
	ResetMinTimeout time.Duration
	// Version is the build version, reported by GetInstallation.
	Version string
	// ProcessPaths are the fixed distribution paths direct provider
	// adapters are built with: berth-core derives them once from its
	// executable's location and its state directory (never from the
	// environment, never a flag). Zero: a direct generation cannot be
	// built, and is recorded not ready.
	ProcessPaths sandbox.ProcessPaths
	// Providers is the provider registry (providers.Default() when nil):
	// in-process tests inject one with a test provider.
	Providers *providers.Registry
}

// withDefaults returns c with every unset duration and the master key file
// filled in from defaults.go.
func (c Config) withDefaults() Config {
	if c.RuntimeKeepalive <= 0 {
		c.RuntimeKeepalive = DefaultRuntimeKeepalive
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.NodeInterval <= 0 {
		c.NodeInterval = DefaultNodeInterval
	}
	if c.LifecycleInterval <= 0 {
		c.LifecycleInterval = DefaultLifecycleInterval
	}
	if c.CreateAbandonAfter <= 0 {
		c.CreateAbandonAfter = DefaultCreateAbandonAfter
	}
	if c.QuiesceTimeout <= 0 {
		c.QuiesceTimeout = DefaultQuiesceTimeout
	}
	if c.RestoreAbandonAfter <= 0 {
		c.RestoreAbandonAfter = DefaultRestoreAbandonAfter
	}
	if c.AuditRetention == 0 {
		c.AuditRetention = DefaultAuditRetention
	}
	if c.MasterKeyFile == "" {
		c.MasterKeyFile = filepath.Join(c.StateDir, "master.key")
	}
	return c
}

// Ready describes a serving Core, for callers that started it.
type Ready struct {
	// MetricsAddr is empty without MetricsListen, like RuntimeAddr
	// without RuntimeListen.
	AdminAddr, PublicAddr, RuntimeAddr, MetricsAddr string
	InstallationID                                  string
	OwnerEpoch                                      uint64
}
