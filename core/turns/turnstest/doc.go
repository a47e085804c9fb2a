// Package turnstest gives the tests of Turns (core/turns) and of the
// Runtime gateway (core/gateway) the Turn service over a fresh database
// with one running Session.
//
// Rules:
//   - It is imported only by tests.
//   - Each New is a real migrated database (core/store/storetest) with its
//     own sealing key and a running Session (storetest.RunningSession) and
//     its device credential, so a test starts where Turns can be submitted.
//   - The Turn service it returns is core/turns' own: the one writer of
//     Turn state, never a stand-in.
//   - It may import core/turns, core/secrets, the store and its test
//     helpers.
package turnstest
