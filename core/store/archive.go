package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"berth.dev/core/store/db"
	"berth.dev/sandbox/errdefs"
)

// ErrSessionDeleted is the class (errdefs.ErrFailedPrecondition) of an
// ArchiveSession of a Session whose deletion was requested: a refusal
// (reason session_deleted) that says what archive applies to.
var ErrSessionDeleted error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "session_deleted",
	"the Session is deleted: archive applies to live Sessions")

// ErrSessionArchived is the class (errdefs.ErrFailedPrecondition) of a
// SubmitTurn to an archived Session: a refusal (reason session_archived)
// that tells the caller what to do.
var ErrSessionArchived error = errdefs.Refuse(errdefs.ErrFailedPrecondition, "session_archived",
	"the Session is archived: it keeps its history and runs nothing; create a new Session")

// ArchiveSession archives Session id (the guide's administrator archive):
// one Session-first transaction that locks the Session, ends its
// Environment by terminal cleanup with cause TerminalArchived (device
// revoked, so no new Runtime connection, input or lease renewal; queued
// Turns failed session_archived; the running Turn asked to cancel, its
// first cancel_requested_at kept; cleanup requested), records the running
// Turn as the allocation's archive_cancel_turn_id only when this archive
// revoked the device, and marks the Session archived. Nothing waits for
// the cancellation: the gateway's existing drain (at most 20 s from the
// Turn's cancel_requested_at) delivers it, and a lost peer, expiry or
// restart ends the Turn by the ordinary sweeps, never as cancelled.
//
// The same transaction records the decision in the audit trail
// (session.archive, by prov, event id eventID, with the counts of what it
// ended): the archive and its record commit together or not at all. prov
// is checked before anything is read (the zero Provenance is invalid).
//
// Archiving again returns the Session unchanged with a zero Termination
// and records nothing (the call itself is in the trail). A Session whose
// deletion was requested is ErrSessionDeleted; a missing one ErrNotFound.
// It is a lifecycle write, fenced like DeleteSession.
func (s *Owner) ArchiveSession(ctx context.Context, id uuid.UUID, prov Provenance, eventID uuid.UUID) (SessionBundle, Termination, error) {
	const op = "archive session"
	if err := prov.valid(); err != nil {
		return SessionBundle{}, Termination{}, fmt.Errorf("%s: %w", op, err)
	}
	var (
		out  SessionBundle
		term Termination
	)
	err := s.ownedTx(ctx, func(q *db.Queries) error {
		var err error
		out, term, _, err = archiveSession(ctx, q, id, prov, eventID)
		return err
	})
	if err != nil {
		return SessionBundle{}, Termination{}, wrap(op, err)
	}
	return out, term, nil
}

// archiveSession is ArchiveSession in the caller's transaction; did
// reports whether it archived (false: the Session was archived already).
func archiveSession(ctx context.Context, q *db.Queries, id uuid.UUID, prov Provenance, eventID uuid.UUID) (SessionBundle, Termination, bool, error) {
	var term Termination
	sess, err := q.LockSession(ctx, id)
	if err != nil {
		return SessionBundle{}, term, false, err
	}
	switch SessionState(sess.State) {
	case SessionArchived:
		out, err := loadBundle(ctx, q, sess)
		return out, term, false, err
	case SessionDeleteRequested:
		return SessionBundle{}, term, false, ErrSessionDeleted
	}
	env, err := q.GetEnvironmentBySession(ctx, sess.ID)
	if err != nil {
		return SessionBundle{}, term, false, err
	}
	// Only an archive that ends a live Environment revokes its device;
	// an Environment that already failed or expired had it revoked by
	// that cleanup.
	firstRevocation := !env.TerminalCause.Valid
	if term, err = terminate(ctx, q, env.ID, TerminalArchived, ""); err != nil {
		return SessionBundle{}, term, false, err
	}
	if firstRevocation && term.Revoked != uuid.Nil && len(term.CancelRequested) > 0 {
		if err := q.RecordArchiveCancelTurn(ctx, db.RecordArchiveCancelTurnParams{
			ID: term.Revoked, TurnID: &term.CancelRequested[0],
		}); err != nil {
			return SessionBundle{}, term, false, err
		}
	}
	if sess, err = q.ArchiveSessionRow(ctx, sess.ID); err != nil {
		return SessionBundle{}, term, false, err
	}
	tenant, project := sess.TenantID, sess.ProjectID
	if err := recordAudit(ctx, q, prov, AuditEntry{
		ID: eventID, Kind: AuditDecision, Action: "session.archive", Resource: "sessions/" + sess.ID.String(),
		Outcome: "ok", TenantID: &tenant, ProjectID: &project,
		Detail: map[string]any{
			"queued_turns_failed":  len(term.SettledTurns),
			"running_turns_cancel": len(term.CancelRequested),
			"device_revoked":       term.Revoked != uuid.Nil,
		},
	}); err != nil {
		return SessionBundle{}, term, false, err
	}
	out, err := loadBundle(ctx, q, sess)
	return out, term, true, err
}
