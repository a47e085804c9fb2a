package turnadmin_test

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/turnadmin"
)

// FuzzSubmitRequest feeds arbitrary bytes, unmarshalled as a
// SubmitTurnRequest the way the gRPC server would, to the request
// validation: it must never panic, and every refusal is an
// errdefs.FieldError naming a field of the request.
func FuzzSubmitRequest(f *testing.F) {
	seeds := []*adminv1.SubmitTurnRequest{
		{},
		{Parent: "sessions/3f0b6a34-6f3c-4b59-9a3f-9b1f7f7f0d11", RequestId: "7d5a3b1e-08b4-4f7c-8e57-2f1c1f6c9a10",
			Turn: &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "echo hi"}}}},
		{Parent: "sessions/3f0b6a34-6f3c-4b59-9a3f-9b1f7f7f0d11", RequestId: "7d5a3b1e-08b4-4f7c-8e57-2f1c1f6c9a10",
			Turn: &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: []string{"ls", "-l"}}}},
				WorkingDirectory: "/workspace/a", Env: map[string]string{"A": "b", "BERTH_X": "y"}, Stdin: []byte{0, 1}}},
		{Parent: "sessions/x/turns/y", RequestId: "nope", Turn: &adminv1.Turn{Name: "sessions/a/turns/b", ExitCode: 3}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req adminv1.SubmitTurnRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		r, err := turnadmin.SubmitRequest(&req)
		if err == nil {
			if r.Timeout <= 0 || r.QueueTimeout <= 0 || !strings.HasPrefix(r.WorkingDirectory, "/workspace") {
				t.Fatalf("accepted request without defaults: %+v", r)
			}
			for k := range r.Env {
				if strings.HasPrefix(strings.ToUpper(k), "BERTH_") {
					t.Fatalf("accepted reserved env %q", k)
				}
			}
			return
		}
		var fe *errdefs.FieldError
		if !errors.As(err, &fe) || fe.Field == "" {
			t.Fatalf("refusal without a field: %v", err)
		}
		if !strings.HasPrefix(fe.Field, "turn") && fe.Field != "parent" && fe.Field != "request_id" {
			t.Fatalf("refusal names %q, not a request field", fe.Field)
		}
	})
}
