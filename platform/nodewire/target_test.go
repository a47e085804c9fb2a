package nodewire

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
)

// TestTargetErrorsRoundTripAsTheirCallWould: one target's error of a
// batched answer crosses in exactly the form a failed GetInfo of that
// target would, and reads back as the same class; an error-less, OK or
// foreign target error is the read's unknown outcome, never success.
func TestTargetErrorsRoundTripAsTheirCallWould(t *testing.T) {
	for _, class := range []error{errdefs.ErrNotFound, errdefs.ErrObservationUnavailable, errdefs.ErrOwnership,
		errdefs.ErrFenced, errdefs.Invalid("reference", "bad")} {
		m := TargetErrorToWire(sandbox.OpGetInfo, class)
		st := codec.Build(sharedRow(Code(m.GetReason())), m.GetMetadata())
		if m.GetCode() != int32(st.Code()) {
			t.Errorf("%v: code %d, reason %q", class, m.GetCode(), m.GetReason())
		}
		back := TargetErrorFromWire(sandbox.OpGetInfo, m)
		if !errors.Is(back, classOf(class)) {
			t.Errorf("%v crossed as %v", class, back)
		}
	}
	if TargetErrorToWire(sandbox.OpGetInfo, nil) != nil {
		t.Error("a nil error crossed")
	}
	// An error of no known class is GetInfo's unknown outcome.
	if m := TargetErrorToWire(sandbox.OpGetInfo, errors.New("engine said no")); m.GetReason() != string(CodeComputeUnconfirmed) {
		t.Errorf("unknown error crossed as %q", m.GetReason())
	}
	for name, m := range map[string]*pb.TargetError{
		"nil":            nil,
		"ok":             {Code: int32(codes.OK), Reason: string(CodeNotFound)},
		"foreign reason": {Code: int32(codes.NotFound), Reason: "gone_fishing"},
		"code mismatch":  {Code: int32(codes.Internal), Reason: string(CodeNotFound)},
	} {
		err := TargetErrorFromWire(sandbox.OpGetInfo, m)
		if err == nil || !errdefs.IsObservationUnavailable(err) {
			t.Errorf("%s: %v, want GetInfo's unknown outcome", name, err)
		}
	}
}

// classOf is the errdefs class a sentinel or field error belongs to.
func classOf(err error) error {
	for _, c := range []error{errdefs.ErrNotFound, errdefs.ErrObservationUnavailable, errdefs.ErrOwnership,
		errdefs.ErrFenced, errdefs.ErrInvalid} {
		if errors.Is(err, c) {
			return c
		}
	}
	return err
}
