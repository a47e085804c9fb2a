package runtimeclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	runtimev1 "berth.dev/proto/berth/runtime/v1"
	"berth.dev/runtimebootstrap"
	"berth.dev/runtimebootstrap/internal/park"
	"berth.dev/runtimebootstrap/turnexec"
)

// ErrStopped matches every *StopError.
var ErrStopped = errors.New("runtime stopped by core")

// StopError reports that Core ended the connection with a reason that no
// retry can fix. Reason is one of runtimev1's stop-for-good reasons.
type StopError struct {
	Reason string
}

func (e *StopError) Error() string { return "core stopped the runtime: " + e.Reason }

// Is makes errors.Is(err, ErrStopped) hold for a *StopError.
func (e *StopError) Is(target error) bool { return target == ErrStopped }

// stopReasons are the ErrorInfo reasons that stop the client for good.
var stopReasons = map[string]bool{
	runtimev1.ReasonCredentialRejected: true,
	runtimev1.ReasonRevoked:            true,
	runtimev1.ReasonProtocolMismatch:   true,
}

// Backoff is the delay between connection attempts: full jitter over a
// ceiling that starts at Initial and doubles up to Max. A connection that
// was welcomed and lasted ResetAfter starts the ceiling over.
type Backoff struct {
	Initial, Max, ResetAfter time.Duration
	// Jitter returns a duration in [0, ceiling]; nil means uniform.
	Jitter func(ceiling time.Duration) time.Duration
}

// DefaultBackoff is the backoff of a Config that gives none.
var DefaultBackoff = Backoff{Initial: 200 * time.Millisecond, Max: 10 * time.Second, ResetAfter: 30 * time.Second}

// delay returns the wait before attempt (0-based) of a run of failures.
func (b Backoff) delay(attempt int) time.Duration {
	ceiling := b.Initial
	for i := 0; i < attempt && ceiling < b.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, b.Max)
	if b.Jitter != nil {
		return min(max(b.Jitter(ceiling), 0), ceiling)
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

// Config configures a Client.
type Config struct {
	// Bootstrap is the validated bootstrap file.
	Bootstrap runtimebootstrap.File
	// BootstrapPath is where the bootstrap file lies; "" means
	// runtimebootstrap.Path. The park marker a quiesce writes lies in the
	// same directory.
	BootstrapPath string
	// RuntimeVersion is sent in Hello for operators.
	RuntimeVersion string
	// Runner runs Turns; nil means the zero Runner (workspace /workspace,
	// shell /bin/sh). Preparation checks the same workspace and shell.
	Runner *turnexec.Runner
	// Logger receives the fixed log lines; nil discards them.
	Logger *slog.Logger
	// DialOptions are added after the transport credentials the URL's
	// scheme chooses (tests inject dialers or credentials here).
	DialOptions []grpc.DialOption
	// Backoff between attempts; zero fields take DefaultBackoff's.
	Backoff Backoff
	// AllowInsecure permits an http Core URL whose host is not a
	// loopback or private address (refused otherwise: the credential
	// would cross a public network in clear).
	AllowInsecure bool
}

// ErrPlaintextRefused refuses an http Core URL to a host that is not a
// loopback or private IP address without Config.AllowInsecure.
var ErrPlaintextRefused = errors.New("plaintext http to a host that is not a loopback or private address is refused: use https, or allow it explicitly (--allow-insecure-core)")

// Client is one Runtime's connection loop.
type Client struct {
	cfg    Config
	target string
	creds  credentials.TransportCredentials
	runner *turnexec.Runner
	log    *slog.Logger
	bo     Backoff
	park   park.Dir
	// journalDir holds the upload journals (filexfer.WriterConfig), in
	// the bootstrap file's directory.
	journalDir string
}

// New checks cfg and returns a Client. Its errors never carry the
// credential.
func New(cfg Config) (*Client, error) {
	if err := cfg.Bootstrap.Validate(); err != nil {
		return nil, fmt.Errorf("runtime client: %w", err)
	}
	target, useTLS, host, err := dialTarget(cfg.Bootstrap.CoreURL)
	if err != nil {
		return nil, fmt.Errorf("runtime client: core_url: %w", err)
	}
	c := &Client{cfg: cfg, target: target, runner: cfg.Runner, log: cfg.Logger, bo: cfg.Backoff}
	bootstrapPath := cfg.BootstrapPath
	if bootstrapPath == "" {
		bootstrapPath = runtimebootstrap.Path
	}
	if useTLS {
		roots, err := coreCA(runtimebootstrap.CAPathBeside(bootstrapPath))
		if err != nil {
			return nil, fmt.Errorf("runtime client: %w", err)
		}
		c.creds = credentials.NewTLS(&tls.Config{ServerName: host, MinVersion: tls.VersionTLS12, RootCAs: roots})
	} else {
		if !cfg.AllowInsecure && !plaintextAllowed(host) {
			return nil, fmt.Errorf("runtime client: core_url: %w", ErrPlaintextRefused)
		}
		c.creds = insecure.NewCredentials()
	}
	if c.runner == nil {
		c.runner = &turnexec.Runner{}
	}
	c.park = park.DirOf(bootstrapPath)
	c.journalDir = filepath.Join(filepath.Dir(bootstrapPath), "transfers")
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.bo.Initial <= 0 {
		c.bo.Initial = DefaultBackoff.Initial
	}
	if c.bo.Max <= 0 {
		c.bo.Max = DefaultBackoff.Max
	}
	if c.bo.ResetAfter <= 0 {
		c.bo.ResetAfter = DefaultBackoff.ResetAfter
	}
	return c, nil
}

// coreCA reads the CA certificate beside the bootstrap file
// (runtimebootstrap.CAFile): when present, it alone is trusted for Core's
// https URL (Core's gateway certificate was issued from the installation
// CA); when absent or empty, the system roots are (nil).
func coreCA(path string) (*x509.CertPool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errors.New("core CA file: cannot be opened")
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, runtimebootstrap.MaxCABytes+1))
	if err != nil || len(data) > runtimebootstrap.MaxCABytes {
		return nil, errors.New("core CA file: unreadable or too large")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil // written empty: Core gave no CA
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, errors.New("core CA file: no PEM certificate")
	}
	return pool, nil
}

// plaintextAllowed reports whether plaintext to host keeps the credential
// off public networks: a loopback or private IP address, or localhost.
// A name cannot be judged without resolving it, so it needs https or
// Config.AllowInsecure.
func plaintextAllowed(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate())
}

// dialTarget maps Core's URL to a gRPC target. The path is ignored (see
// the package doc).
func dialTarget(raw string) (target string, useTLS bool, host string, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, "", errors.New("not a URL")
	}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		useTLS = true
		if port == "" {
			port = "443"
		}
	default:
		return "", false, "", errors.New("scheme must be https or http")
	}
	host = u.Hostname()
	if host == "" {
		return "", false, "", errors.New("no host")
	}
	return "dns:///" + net.JoinHostPort(host, port), useTLS, host, nil
}

// Run connects to Core and serves Turns until ctx is done (it returns
// ctx.Err()) or Core stops the Runtime for good (a *StopError).
func (c *Client) Run(ctx context.Context) error {
	attempt := 0
	for {
		welcomed, err := c.connect(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		code, reason := errorReason(err)
		if stopReasons[reason] {
			c.log.Error("core stopped this runtime for good", "code", code, "reason", reason)
			return &StopError{Reason: reason}
		}
		c.log.Warn("connection ended", "code", code, "reason", reason)
		if !welcomed.IsZero() && time.Since(welcomed) >= c.bo.ResetAfter {
			attempt = 0
		}
		delay := c.bo.delay(attempt)
		attempt++
		c.log.Info("reconnecting after a delay", "delay_ms", delay.Milliseconds(), "attempt", attempt)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// errorReason returns err's gRPC code and, when it carries an ErrorInfo of
// the runtime domain, its reason. Only these fixed strings are logged.
func errorReason(err error) (code, reason string) {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == runtimev1.ErrorDomain {
			reason = info.GetReason()
			break
		}
	}
	return st.Code().String(), reason
}
