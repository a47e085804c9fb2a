package nodewire

import (
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// CommandToWire validates cmd (sandbox.Command.Validate) and converts it.
// Nothing invalid is sent: a failure is of class ErrInvalid.
func CommandToWire(cmd sandbox.Command) (*pb.Command, error) {
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	if !fitsInt32(cmd.OutputLimit) {
		return nil, errdefs.Invalid("command.output_limit", reasonRange)
	}
	return &pb.Command{
		Args:        cmd.Args,
		Directory:   cmd.Directory,
		Stdin:       cmd.Stdin,
		OutputLimit: int32(cmd.OutputLimit),
	}, nil
}

// CommandFromWire converts and validates a Command (paths "command.*"). It
// is required; empty args and stdin become nil.
func CommandFromWire(m *pb.Command) (sandbox.Command, error) {
	if m == nil {
		return sandbox.Command{}, required("command")
	}
	cmd := sandbox.Command{
		Args:        emptyNil(m.GetArgs()),
		Directory:   m.GetDirectory(),
		Stdin:       emptyNil(m.GetStdin()),
		OutputLimit: int(m.GetOutputLimit()),
	}
	if err := cmd.Validate(); err != nil {
		return sandbox.Command{}, err
	}
	return cmd, nil
}

func emptyNil[S ~[]E, E any](s S) S {
	if len(s) == 0 {
		return nil
	}
	return s
}

// CommandResultToWire converts a settled command's result. An exit code
// outside int32 or an output stream longer than sandbox.MaxOutputLimit
// fails with ErrContract.
func CommandResultToWire(r sandbox.CommandResult) (*pb.CommandResult, error) {
	if err := checkCommandResult("result", r); err != nil {
		return nil, asResult(err, "result")
	}
	return &pb.CommandResult{
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,
		ExitCode:        int32(r.ExitCode),
	}, nil
}

// CommandResultFromWire converts and validates a CommandResult (paths
// "result.*"). It is required; empty streams become nil. The caller still
// checks each stream against the command's own Limit.
func CommandResultFromWire(m *pb.CommandResult) (sandbox.CommandResult, error) {
	if m == nil {
		return sandbox.CommandResult{}, required("result")
	}
	r := sandbox.CommandResult{
		Stdout:          emptyNil(m.GetStdout()),
		Stderr:          emptyNil(m.GetStderr()),
		StdoutTruncated: m.GetStdoutTruncated(),
		StderrTruncated: m.GetStderrTruncated(),
		ExitCode:        int(m.GetExitCode()),
	}
	if err := checkCommandResult("result", r); err != nil {
		return sandbox.CommandResult{}, err
	}
	return r, nil
}

func checkCommandResult(path string, r sandbox.CommandResult) error {
	switch {
	case len(r.Stdout) > sandbox.MaxOutputLimit:
		return errdefs.Invalid(sub(path, "stdout"), "exceeds the output bound")
	case len(r.Stderr) > sandbox.MaxOutputLimit:
		return errdefs.Invalid(sub(path, "stderr"), "exceeds the output bound")
	case !fitsInt32(r.ExitCode):
		return errdefs.Invalid(sub(path, "exit_code"), reasonRange)
	}
	return nil
}

// ObservationToWire converts an observation into the ObserveResponse. An
// invalid Reference fails with ErrContract.
func ObservationToWire(o sandbox.Observation) (*pb.ObserveResponse, error) {
	if err := o.Reference.Validate(); err != nil {
		return nil, asResult(err, "reference")
	}
	return &pb.ObserveResponse{
		Reference:        ReferenceToWire(o.Reference),
		CpuUsageNanos:    o.CPUUsageNanos,
		MemoryBytes:      o.MemoryBytes,
		MemoryLimitBytes: o.MemoryLimitBytes,
		Pids:             o.PIDs,
	}, nil
}

// ObservationFromWire converts and validates an ObserveResponse (paths
// "reference.*"). The caller still checks the Reference against the one it
// asked for.
func ObservationFromWire(m *pb.ObserveResponse) (sandbox.Observation, error) {
	if m == nil {
		return sandbox.Observation{}, required(pathResponse)
	}
	ref, err := referenceFromWire("reference", m.GetReference())
	if err != nil {
		return sandbox.Observation{}, err
	}
	return sandbox.Observation{
		Reference:        ref,
		CPUUsageNanos:    m.GetCpuUsageNanos(),
		MemoryBytes:      m.GetMemoryBytes(),
		MemoryLimitBytes: m.GetMemoryLimitBytes(),
		PIDs:             m.GetPids(),
	}, nil
}
