package e2b

import (
	"context"
	"errors"
	"slices"

	"berth.dev/sandbox"
)

// The probe's fixed diagnostic codes.
const (
	ProbeCredentialRejected = "credential_rejected"
	ProbeVendorUnreachable  = "vendor_unreachable"
	ProbeVendorUnavailable  = "vendor_unavailable"
	ProbeFenced             = "call_fenced"
)

// Probe is an authenticated cheap read: one list page of at most one
// sandbox of the installation, under the fence.
func (p *Provider) Probe(ctx context.Context) error {
	err := p.fenced(ctx, sandbox.Reference{}, func(ctx context.Context) error {
		_, err := p.c.list(ctx, map[string]string{MetaInstallation: p.installation}, 1)
		return err
	})
	switch s := statusOf(err); {
	case err == nil:
		return nil
	case s == 401 || s == 403:
		return &sandbox.ProbeError{Code: ProbeCredentialRejected}
	case s != 0:
		return &sandbox.ProbeError{Code: ProbeVendorUnavailable}
	case errors.Is(err, sandbox.ErrCallFenced), errors.Is(err, errClosed):
		return &sandbox.ProbeError{Code: ProbeFenced}
	}
	return &sandbox.ProbeError{Code: ProbeVendorUnreachable}
}

// VerifyCredential checks, with reads only, that cfg's key is accepted
// and sees every sandbox of the installation that the adapter's current
// key sees (a key of another team is accepted by E2B but sees none of
// them, and must not look like "all gone"). When the current key is
// itself rejected, nothing can be compared: the new key must then only
// be accepted. It runs under the fence's turn of the zero Reference.
func (p *Provider) VerifyCredential(ctx context.Context, n sandbox.NativeConfiguration) error {
	if err := p.ops.Check(sandbox.OpVerifyCredential); err != nil {
		return err
	}
	cfg, ok := n.(Config)
	if !ok {
		return errOtherKind
	}
	if !validKey(cfg.key.Reveal()) {
		return errCredential
	}
	err := p.fenced(ctx, sandbox.Reference{}, func(ctx context.Context) error {
		mine := map[string]string{MetaInstallation: p.installation}
		theirs, err := p.c.withKey(cfg.key).list(ctx, mine, pageLimit)
		if err != nil {
			return readErr(err)
		}
		current, err := p.c.list(ctx, mine, pageLimit)
		switch s := statusOf(err); {
		case s == 401 || s == 403:
			return nil
		case err != nil:
			return errUnavailable
		}
		seen := make([]string, 0, len(theirs))
		for _, s := range theirs {
			seen = append(seen, s.SandboxID)
		}
		for _, s := range current {
			if !slices.Contains(seen, s.SandboxID) {
				return errOtherTeam
			}
		}
		return nil
	})
	if isContext(err) {
		return errUnavailable
	}
	return err
}
