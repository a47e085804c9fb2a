// Package pgerr is the one place that classifies PostgreSQL and pgx
// failures into Berth's error classes (berth.dev/sandbox/errdefs), so the
// rest of Core decides with errors.Is and never inspects SQLSTATE codes,
// driver types or message text.
//
// Rules:
//   - Classify is applied once, where a query's error leaves the store;
//     classifying an already classified error returns it unchanged.
//   - The class is a promise about effects. ErrExists and ErrInvalid (a
//     constraint or data error) and ErrRetryable (serialization failure,
//     deadlock, lock timeout) mean the statement and its transaction had no
//     effect. ErrObservationUnavailable means the database could not be
//     reached or stopped answering: for a read nothing was learned, and for
//     a write the outcome is unknown unless the transaction is known not to
//     have committed, so callers re-read instead of assuming either way.
//     Anything else keeps its original error unclassified, which is an
//     unknown outcome, never permission to retry.
//   - An ErrObservationUnavailable error of the database also carries the
//     refusal ErrDatabaseUnavailable (errors.As finds it): a boundary that
//     sends refusals (the admin API) answers UNAVAILABLE with reason
//     database_unavailable and a message that says to retry, never the
//     class's observation_unavailable, which names a node's compute there.
//   - Texts name constraints and SQLSTATE codes, never row values: the
//     server's detail line (which quotes the offending key) is dropped.
//     Only connection failures and unclassified server errors keep the
//     driver's or server's own reason, which names users, databases and
//     schema objects, never passwords or values.
//     Nothing the store sends is secret (token secrets are hashed and keys
//     encrypted before they reach it), but values stay out regardless.
//   - pgerr imports only errdefs, pgx and the standard library.
package pgerr
