// Package suspension is the one writer of compute-phase state: the
// suspension cycle's intents and receipts (quiesce, capture, restore),
// their outcomes, retention expiry, owed leftovers and an admin's
// suspend-now and resume-now (the guide's "Suspension"; the phases and
// their fences are in core/store/suspension.go). The Runtime gateway and
// the node's lifecycle worker record through it as they record Turns
// through core/turns.
//
// Rules:
//   - Only this package calls the store's suspension writes (Writes);
//     writers_test.go fails the build's tests when another package does.
//   - It decides nothing and calls no provider: callers bring the
//     evidence (a Runtime's acknowledgement, a provider's answer); every
//     method is one fenced store transaction and returns the store's
//     errors as they are (ErrFenced, store.ErrSuperseded, ErrNoRoom...).
//   - The one signal of a compute-phase transition is an events.Phase of
//     the Environment, published on the bus after the transition
//     committed: arming, every abort, a refused capture claim, the
//     capture's record or rollback, arming and recording a restore,
//     abandoning one, and retention expiry. The claim of a capture is not
//     announced (the quiesced Runtime's connection ends on its record),
//     nor are receipts (an acknowledgement, a restore's claim, a deleted
//     leftover) or an admin's request (the store wakes the node's worker).
//     Retention expiry is a terminal cleanup: it also publishes its
//     Session and the Turns it settled (events.Terminated), as a deletion.
//   - An announcement only shortens a wait: every waiter also reads the
//     phase on its own, so a missed one delays and never loses work.
package suspension
