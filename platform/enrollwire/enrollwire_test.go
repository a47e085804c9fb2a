package enrollwire_test

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/platform/enrollwire"
	enrollmentv1 "berth.dev/proto/berth/enrollment/v1"
	"berth.dev/sandbox/errdefs"
)

// TestBothSidesReadOneTable: what Core's side encodes with its class, the
// node agent's side decodes to its own class, with the same code, reason
// and message; the shared rows and the unknown row cross alike.
func TestBothSidesReadOneTable(t *testing.T) {
	coreRejected := fmt.Errorf("enrollment rejected: %w", errdefs.ErrFenced)
	agentRejected := fmt.Errorf("enrollment token rejected: %w", errdefs.ErrFenced)
	server, client := enrollwire.Codec(coreRejected), enrollwire.Codec(agentRejected)

	st := status.Convert(server.ToStatus(fmt.Errorf("check: %w", coreRejected)))
	if st.Code() != codes.PermissionDenied || st.Message() != enrollwire.RejectedMessage {
		t.Fatalf("token refusal crosses as %v %q", st.Code(), st.Message())
	}
	d, ok := client.Decode(st)
	if !ok || !errors.Is(d.Row.Class, agentRejected) || d.Row.Reason != enrollmentv1.ReasonTokenRejected {
		t.Fatalf("the node agent reads the token refusal as %+v (ok %v)", d.Row, ok)
	}

	d, ok = client.Decode(status.Convert(server.ToStatus(errdefs.Invalid("csr_der", "not a certificate request"))))
	if !ok || !errors.Is(d.Row.Class, errdefs.ErrInvalid) {
		t.Fatalf("an invalid request reads as %+v (ok %v)", d.Row, ok)
	}
	st = status.Convert(server.ToStatus(errors.New("disk on fire")))
	if st.Code() != codes.Internal || st.Message() != "enrollment failed" {
		t.Fatalf("an unknown error crosses as %v %q", st.Code(), st.Message())
	}
}

// TestRefusalClassMustBeFenced: a side that passes a class outside
// ErrFenced is stopped when it builds the codec.
func TestRefusalClassMustBeFenced(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Codec accepted a token refusal class that does not wrap ErrFenced")
		}
	}()
	enrollwire.Codec(errors.New("rejected"))
}
