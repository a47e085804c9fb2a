// Package msbtest is the native-side fixture of the microsandbox adapter:
// a fake msb executable (fakemsb, built by Build) over a state file in its
// MSB_HOME, and Fixture, which plants records and arms faults in that
// state and reads the calls it recorded, and ContractCases, the adapter's
// fault table for the shared contract suite, in process and through a
// node agent alike.
//
// Rules:
//   - The adapter under test is the real one, driving the fake through
//     its real process boundary (microsandbox.Exec); Fixture implements
//     contracttest.Native and is never a fake adapter.
//   - fakemsb imitates msb 0.6.18 only where the adapter or an operator
//     reads it (argv grammar, JSON keys, exit codes, first error words);
//     TestFixtureMatchesRealMSB compares the two with the real msb
//     (BERTH_TEST_MSB), so a difference fails a test, not a deployment.
//   - The state file's format belongs to fakemsb and this package alone;
//     every change to it happens under fakemsb's file lock.
//   - A fault is armed for the next call of one name and consumed by it;
//     calls are recorded with their full argv (the adapter puts no secret
//     there, which the lifecycle test checks). Calls leaves out the
//     readiness probe's, which belong to no operation.
package msbtest
