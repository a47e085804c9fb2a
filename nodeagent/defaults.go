package nodeagent

import "time"

// Every default and time bound of berth-nodeagent lives here: a missing
// optional field of the configuration file takes its default from here,
// and so does the command's --config flag, whose default --help shows.

// DefaultConfigFile is the configuration file serve and enroll read when
// --config is not given: the FHS place of a host's configuration, beside
// the other Berth files in /etc/berth.
const DefaultConfigFile = "/etc/berth/nodeagent.json"

// DefaultHealthInterval is the health report period when the
// configuration sets none: a report every 10 s keeps the node well inside
// Core's 45 s presence window even when three reports in a row are lost,
// at one adapter probe per report.
const DefaultHealthInterval = 10 * time.Second

// MaxOperationTime bounds an operation whose caller sent no deadline.
const MaxOperationTime = 10 * time.Minute

// CreateGrace is how long a started Create goes on after its caller went
// away (see runTracked).
const CreateGrace = 5 * time.Second

// EnrollTimeout bounds `berth-nodeagent enroll`: one dial to Core and one
// call. Core answers at once or not at all, so waiting longer only delays
// the operator's error.
const EnrollTimeout = time.Minute

const (
	// adapterBuildTimeout bounds the adapter's construction at start-up
	// (it may reach its engine and check its image): a hung engine fails
	// the start instead of hanging it.
	adapterBuildTimeout = time.Minute

	// probeTimeout bounds one readiness probe, run for every health report:
	// a probe that hangs reports the node not ready instead of holding
	// the report back.
	probeTimeout = 10 * time.Second

	// gracefulStopTimeout is how long calls in flight get to finish at
	// shutdown (the Connect streams end at once) before the server stops
	// hard. A call the hard stop cuts off is an unknown outcome that Core
	// records and only observes afterwards, so a stop need not wait for a
	// long operation to end.
	gracefulStopTimeout = 10 * time.Second
)
