package store

import (
	"context"

	"berth.dev/core/store/db"
)

// RecordAuditInTx runs recordAudit for p and e in one transaction of s,
// as a deciding write does, then returns fail: nil commits, anything else
// rolls the event back with the (absent) decision.
func RecordAuditInTx(ctx context.Context, s *Store, p Provenance, e AuditEntry, fail error) error {
	return s.inTx(ctx, func(q *db.Queries) error {
		if err := recordAudit(ctx, q, p, e); err != nil {
			return err
		}
		return fail
	})
}
