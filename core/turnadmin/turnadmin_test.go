package turnadmin_test

import (
	"strings"
	"testing"
	"time"

	adminv1 "berth.dev/proto/berth/admin/v1"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/store"
	"berth.dev/core/turnadmin"
)

// TestSubmitRequestNamesRequestFields: the logic (core/turns) names its
// own fields; the adapter reports them at their place in the request.
func TestSubmitRequestNamesRequestFields(t *testing.T) {
	ok := func() *adminv1.SubmitTurnRequest {
		return &adminv1.SubmitTurnRequest{Parent: "sessions/3f0b6a34-6f3c-4b59-9a3f-9b1f7f7f0d11", RequestId: "7d5a3b1e-08b4-4f7c-8e57-2f1c1f6c9a10",
			Turn: &adminv1.Turn{Command: &adminv1.Command{Program: &adminv1.Command_ShellScript{ShellScript: "true"}}}}
	}
	argv := func(args ...string) *adminv1.Command {
		return &adminv1.Command{Program: &adminv1.Command_Argv{Argv: &adminv1.Argv{Args: args}}}
	}
	for field, edit := range map[string]func(*adminv1.SubmitTurnRequest){
		"turn.command.argv.args": func(r *adminv1.SubmitTurnRequest) { r.Turn.Command = argv("") },
		"turn.command.shell_script": func(r *adminv1.SubmitTurnRequest) {
			r.Turn.Command.Program = &adminv1.Command_ShellScript{ShellScript: "a\x00b"}
		},
		"turn.working_directory": func(r *adminv1.SubmitTurnRequest) { r.Turn.WorkingDirectory = "/etc" },
		"turn.env":               func(r *adminv1.SubmitTurnRequest) { r.Turn.Env = map[string]string{"BERTH_X": "1"} },
		"turn.stdin":             func(r *adminv1.SubmitTurnRequest) { r.Turn.Stdin = make([]byte, 1<<20+1) },
	} {
		r := ok()
		edit(r)
		_, err := turnadmin.SubmitRequest(r)
		if got, _ := errdefs.Field(err); got != field {
			t.Errorf("%s: field %q (%v)", field, got, err)
		}
	}
	if _, err := turnadmin.SubmitRequest(ok()); err != nil {
		t.Fatal(err)
	}
	r := ok()
	r.Turn.Command = argv(strings.Repeat("x", 10))
	if _, err := turnadmin.SubmitRequest(r); err != nil {
		t.Fatal(err)
	}
}

// TestProtoReturnsTheQueueTimeout: a Turn's queue timeout is returned like
// its timeout.
func TestProtoReturnsTheQueueTimeout(t *testing.T) {
	script := "true"
	p := turnadmin.Proto(store.Turn{ShellScript: &script, Timeout: time.Minute, QueueTimeout: 1234 * time.Millisecond})
	if p.GetTimeout().AsDuration() != time.Minute || p.GetQueueTimeout().AsDuration() != 1234*time.Millisecond {
		t.Fatalf("timeout %v, queue timeout %v", p.GetTimeout(), p.GetQueueTimeout())
	}
}
