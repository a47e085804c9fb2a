// Package audit is the one writer of the audit trail (audit_events,
// migration 0025; docs/tenants-plan.md §2.6): who (the administrator, a
// project key by id, or Core), what, when (the database clock), which
// request and how it ended.
//
// Rules:
//   - It alone calls the store's audit writes and makes a Provenance
//     (Writes; TestOneWriterOfAuditEvents): From(ctx), from the admin
//     server's principal and the call's request id, and Core(reason) for
//     Core's own decisions. The zero Provenance is refused by the store
//     (errdefs.ErrInvalid), so a decision cannot be recorded without who
//     made it.
//   - Decision events are recorded by their deciding store write, in its
//     transaction, with the Provenance its caller made here (the store's
//     recordAudit): they commit or roll back with the decision.
//   - Call events are best effort after the fact: the admin server's last
//     interceptor hands each finished call of a mutating method
//     (admin.Mutating) to Writer.Call on a context detached from the call
//     and bounded by WriteTimeout. A failed write is logged and counted
//     (berth.audit.write.failures) and never changes the call's answer.
//   - A project key's call refused by the admin server's tap
//     (project_key_method_denied) is queued (Writer.Denied: no I/O, never
//     blocks; a full queue drops and counts) and written by Writer.Run,
//     one goroutine. Unauthenticated calls are never recorded: a caller
//     without a credential cannot grow the table.
//   - Nothing recorded is a secret: the actor is "admin", "key:<id>" or
//     "core"; the resource is a name of the admin API's patterns or
//     nothing; detail holds authored keys only.
//   - Retention: Sweeper, owner-only, deletes events older than the
//     retention (--audit-retention, at least MinRetention) every
//     SweepInterval, in batches of store.AuditSweepBatch, on the database
//     clock.
package audit
