package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"berth.dev/core/projects"
)

// TokenPrefix starts every admin token; the rest is 32 random bytes in
// unpadded base64url.
const TokenPrefix = "berth-admin-v1."

// tokenSecretBytes is the entropy of an admin token.
const tokenSecretBytes = 32

// The authorization metadata key and scheme (RFC 6750).
const (
	authorizationKey = "authorization"
	bearerScheme     = "bearer"
)

// The fixed messages of refused calls. Neither ever carries what the caller
// sent.
const (
	msgMissingToken = "missing admin bearer token"
	msgInvalidToken = "invalid admin bearer token"
)

// The unauthenticated surface: the standard health service and server
// reflection (both versions), nothing else.
//
//   - Health must be open: load balancers and orchestrator probes cannot
//     hold the admin token, and it answers only SERVING or NOT_SERVING.
//   - Reflection is open too. grpcurl resolves every method through
//     reflection, the health check included, so a closed reflection
//     service would break a tokenless "grpcurl ... grpc.health.v1.Health/Check"
//     probe. What it reveals is harmless: the berth.admin.v1 schema is
//     public, and which services are registered already shows through
//     health checks by service name.
//
// Every berth.admin.v1 method, and every method this server does not
// serve, needs the token. grpcurl takes it from the environment with
// -expand-headers, so it never appears on a command line:
//
//	grpcurl -expand-headers -H 'authorization: Bearer ${BERTH_ADMIN_TOKEN}' host:port list
var exemptPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// NewAdminToken returns a new admin token ("berth-admin-v1." followed by 32
// random bytes in unpadded base64url) and its SHA-256 digest, the only form
// Core stores or configures. The token is shown once to the operator.
func NewAdminToken() (token string, digest []byte, err error) {
	secret := make([]byte, tokenSecretBytes)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, err
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(secret)
	return token, TokenDigest(token), nil
}

// TokenDigest returns the SHA-256 digest of an admin token's full text.
func TokenDigest(token string) []byte {
	d := sha256.Sum256([]byte(token))
	return d[:]
}

// authenticator checks the admin bearer token and project keys. With a
// configured digest of the wrong length it refuses every admin token
// (fail closed); without keys it refuses every project key.
type authenticator struct {
	digest [sha256.Size]byte
	ok     bool
	keys   KeyAuthenticator
	audit  auditing
}

func newAuthenticator(digest []byte, keys KeyAuthenticator) authenticator {
	a := authenticator{keys: keys}
	if len(digest) == sha256.Size {
		copy(a.digest[:], digest)
		a.ok = true
	}
	return a
}

// exempt reports whether fullMethod is served without the token.
func exempt(fullMethod string) bool {
	for _, p := range exemptPrefixes {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}

// check authenticates a call's metadata for fullMethod and returns its
// principal. An admin token: it compares the SHA-256 of the presented
// token with the configured digest in constant time; both are
// fixed-length digests, so neither the comparison nor its timing depends
// on the token's text. A project key ("berth-key-v1."): the key index's
// in-memory Check (no I/O), then the method, which must be one a key may
// call (keyMethods; PERMISSION_DENIED otherwise); the principal is
// provisional until the interceptor's verify.
func (a authenticator) check(md metadata.MD, fullMethod string) (Principal, error) {
	values := md.Get(authorizationKey)
	if len(values) == 0 {
		return Principal{}, unauthenticated(msgMissingToken)
	}
	if len(values) != 1 {
		return Principal{}, unauthenticated(msgInvalidToken)
	}
	token, ok := bearerToken(values[0])
	if !ok {
		return Principal{}, unauthenticated(msgInvalidToken)
	}
	if projects.IsKeyToken(token) {
		if a.keys == nil {
			return Principal{}, unauthenticated(msgInvalidKey)
		}
		k, ok := a.keys.Check(token)
		if !ok {
			return Principal{}, unauthenticated(msgInvalidKey)
		}
		if !keyMethods[fullMethod] {
			// The key authenticated: the refusal names it for the audit
			// trail (tap), never for the handler.
			return Principal{key: k}, keyMethodDenied()
		}
		return Principal{key: k}, nil
	}
	presented := sha256.Sum256([]byte(token))
	match := subtle.ConstantTimeCompare(presented[:], a.digest[:]) == 1
	if !match || !a.ok {
		return Principal{}, unauthenticated(msgInvalidToken)
	}
	return Principal{admin: true}, nil
}

// bearerToken extracts the token of "Bearer <token>" (scheme
// case-insensitive, RFC 7235).
func bearerToken(v string) (string, bool) {
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, bearerScheme) {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// tap authenticates every call that is not exempt as soon as its headers
// arrive (grpc.InTapHandle), before grpc-go reads, buffers or decodes a
// byte of its body: an unauthenticated caller costs Core one header block
// (bounded by MaxHeaderListBytes), never a message. grpc-go sends the
// returned status, ErrorInfo included, as the call's trailers and resets
// the stream. It is the server's only authentication: an interceptor would
// run after the request message was decoded. An authenticated call's
// context carries its Principal (grpc-go hands the tap's context to the
// handler).
func (a authenticator) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if exempt(info.FullMethodName) {
		return ctx, nil
	}
	p, err := a.check(info.Header, info.FullMethodName)
	if err != nil {
		// Only an authenticated key's refusal is recorded, queued: the
		// tap does no I/O. An unauthenticated call is never recorded.
		a.audit.denied(info.FullMethodName, p)
		return ctx, err
	}
	return withPrincipal(ctx, p), nil
}
