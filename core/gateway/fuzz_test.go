package gateway

import (
	"testing"

	"google.golang.org/protobuf/proto"

	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/store"
)

// FuzzResultFromWire feeds arbitrary bytes, unmarshalled as a Runtime's
// ConnectRequest, to the mapping of its TurnResult: it never panics, and an
// accepted result is always one the store can record (a terminal state,
// an exit code exactly for completed Turns, a fixed failure code exactly
// for failed ones, no negative counts).
func FuzzResultFromWire(f *testing.F) {
	for _, r := range []*runtimev1.TurnResult{
		{Outcome: runtimev1.TurnResult_OUTCOME_EXITED, ExitCode: 3, StdoutBytes: 10},
		{Outcome: runtimev1.TurnResult_OUTCOME_FAILED, FailureCode: "program_not_found"},
		{Outcome: runtimev1.TurnResult_OUTCOME_FAILED, FailureCode: "native text\n"},
		{Outcome: runtimev1.TurnResult_OUTCOME_TIMED_OUT, Signal: 9, StdoutBytes: -1},
		{Outcome: 42},
	} {
		b, err := proto.Marshal(&runtimev1.ConnectRequest{Message: &runtimev1.ConnectRequest_TurnResult{TurnResult: r}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m runtimev1.ConnectRequest
		if proto.Unmarshal(data, &m) != nil {
			return
		}
		res, ok := resultFromWire(m.GetTurnResult())
		if !ok {
			return
		}
		switch res.State {
		case store.TurnCompleted:
			if res.ExitCode == nil || res.FailureCode != "" {
				t.Fatalf("completed %+v", res)
			}
		case store.TurnFailed:
			switch res.FailureCode {
			case "invalid_turn", "working_directory_missing", "program_not_found", "start_failed":
			default:
				t.Fatalf("failed with code %q", res.FailureCode)
			}
		case store.TurnCancelled, store.TurnTimedOut:
			if res.ExitCode != nil || res.FailureCode != "" {
				t.Fatalf("%s %+v", res.State, res)
			}
		default:
			t.Fatalf("state %q", res.State)
		}
		if res.StdoutBytes < 0 || res.StderrBytes < 0 || res.Signal < 0 {
			t.Fatalf("negative %+v", res)
		}
	})
}
