// Package bench measures Berth against the raw Docker Engine in the same
// run and prints one table (`make bench`):
//
//   - P1: Session create until the Session API reports execution admitted,
//     through a real berth-core at its default intervals and an enrolled
//     berth-nodeagent, against the engine alone creating the adapter's two
//     volumes and its exact container (Provider.ContainerCreateOptions)
//     and starting it until its first process reaches a TCP listener on
//     this host;
//   - P2: a Turn round trip for `true` (SubmitTurn until its output stream
//     ends and GetTurn reads the result) against an Engine API exec of
//     `true` in the same container (create, start attached, exit code);
//   - P3: RunCommand(`true`) through Core's node proxy and a node agent
//     against the Docker adapter in this process;
//   - P4: throughput, 16 Sessions created at once over four node agents on
//     the one engine until all are execution admitted, against the engine
//     alone doing P1's baseline for 16 containers with the same
//     parallelism; the ratio is Sessions per second over containers per
//     second;
//   - P6: failure detection, a bound with no baseline: the time from a
//     node agent killed, stopped (SIGSTOP) or cut off (its path
//     black-holed by a faultnet.Proxy: connections stay open, bytes are
//     dropped) until the admin API reports it not connected, which is when
//     placement stops choosing it. At most 5 samples per fault, each
//     costing a keepalive timeout and a reconnection;
//   - P7: Docker filesystem checkpoints, Suspend and Resume through Core's
//     node proxy and a node agent for a 10 MB and a 100 MB workspace,
//     against the engine alone copying the same volumes' bytes into new
//     volumes through the same client (a never-started container, the
//     archive read and write of /home and /environment).
//   - P8: suspension and wake through Core, with its Runtime, at Core's
//     defaults (the deployment suspends after a minute idle): P8a
//     SuspendSession until the Session reports SUSPENDED for a 10 MB
//     workspace (quiesce, capture, source removed) against P7's engine
//     copy of the same volumes; P8b a Turn on the suspended Session that
//     reads the workspace back, submit to result (restore, wake of the
//     parked Runtime, reconnection, the Turn) against that copy plus P1's
//     engine start; P8c, a bound, how long after its idle time a Session
//     left idle is reported SUSPENDED (at most 10 Sessions, idle 3 s
//     apart).
//
// P5, the 1,000-node scale simulator, is test/scale (`make bench-scale`).
//
// Rules: every baseline does the same work through the Engine API from Go
// with the adapter's own client (docker.NewClient), never through a CLI
// process; the docker CLI's figures are printed beside, never divided by.
// Berth runs at its default settings, as `berth-core serve` and
// `berth-nodeagent serve` do when installed: the Runtime gateway serves
// TLS from the installation CA, the node agents report health at their
// default interval, and Core gets no interval flag. The table's header
// reads Core's argv and the agents' configuration files and names every
// flag or key beyond addresses and paths (stack.Settings); the benchmark
// refuses to run if there is one, and the smoke run's header lists its
// short intervals. A Berth p99 of fewer than 100 samples is printed as
// "max": that is what it is. Samples are interleaved, Berth then
// baseline, and everything a sample creates is deleted before the next
// one. Nothing here asserts a time: the smoke test runs each measure once
// so that the benchmark cannot rot, and the goals are only reported.
package bench
