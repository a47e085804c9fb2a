// Command fakemsb behaves like msb 0.6.18 for exactly the subcommands the
// microsandbox adapter drives (--version, run --detach, inspect, list,
// remove, exec, metrics, image inspect), with the same argv grammar, JSON
// shapes, exit codes and error lines, over a state file in $MSB_HOME/fake
// (msbtest owns its format).
//
// Rules:
//   - No microVM exists: a sandbox is a record. Booting succeeds or fails
//     as the state says (a host without virtualization: the record stays
//     Stopped and msb's boot error is printed, as the real msb does).
//   - exec runs the command after "--" on the host in a scratch
//     directory, so stdin, output and exit codes are real; like msb's,
//     it first boots a sandbox that is not running.
//   - run on an existing name starts that sandbox (msb's reuse), remove
//     selects by names and by ANDed labels, as msb does.
//   - Faults armed by msbtest hit the next call of a name: transport
//     (killed before doing anything), dispatch (does the work, tells the
//     test, hangs until killed), cleanup (remove stops the VM, keeps the
//     record, fails), fail (exit 1 before doing anything), empty (list
//     answers [] whatever exists: a stale answer), hang (does nothing,
//     tells the test, hangs until killed).
//   - Every call is recorded, under the state's lock, before it acts.
package main
