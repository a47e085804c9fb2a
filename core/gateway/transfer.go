package gateway

import (
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"berth.dev/platform/errgrpc"
	runtimev1 "berth.dev/proto/berth/runtime/v1"

	"berth.dev/core/files"
	"berth.dev/core/store"
	"berth.dev/runtimebootstrap"
)

// transferStream is a Transfer stream as the gateway uses it.
type transferStream = grpc.BidiStreamingServer[runtimev1.TransferRequest, runtimev1.TransferResponse]

// errNotClaimed ends a Transfer stream whose operation the device's
// current connection does not hold (any more), or that nobody waits for.
var errNotClaimed = errors.New("transfer not claimed")

// transferCodec is codec plus transfer_not_claimed.
var transferCodec = errgrpc.New(runtimev1.ErrorDomain, append(slices.Clone(sharedRows),
	errgrpc.Row{Class: errNotClaimed, Code: codes.Unavailable, Reason: runtimev1.ReasonTransferNotClaimed, Message: "transfer not claimed by this connection"},
), errgrpc.Options{Unknown: errgrpc.Row{Code: codes.Unavailable, Reason: runtimev1.ReasonTransferNotClaimed, Message: "core cannot serve the transfer now"}})

// Transfer serves one file operation's bytes (see the proto): after the
// hello is checked against the device's credential and the operation's
// claim, core/files pumps the stream from the admin call that waits for
// it, and Transfer returns when that call is done with it.
func (g *Gateway) Transfer(s transferStream) error { return transferCodec.ToStatus(g.transfer(s)) }

func (g *Gateway) transfer(s transferStream) error {
	if g.cfg.Files == nil {
		return errNotClaimed
	}
	type first struct {
		m   *runtimev1.TransferRequest
		err error
	}
	got := make(chan first, 1)
	go func() {
		m, err := s.Recv()
		got <- first{m, err}
	}()
	var h *runtimev1.TransferHello
	select {
	case f := <-got:
		if f.err != nil {
			return refusedMessage(f.err)
		}
		h = f.m.GetHello()
	case <-time.After(DefaultHelloWait):
		return errInvalid
	case <-s.Context().Done():
		return nil
	}
	if h == nil {
		return errInvalid
	}
	if h.GetProtocolVersion() != runtimev1.ProtocolVersion {
		return errProtocol
	}
	device, err := uuid.Parse(h.GetDeviceId())
	if err != nil || device.String() != h.GetDeviceId() || len(h.GetCredential()) == 0 || len(h.GetCredential()) > maxCredential {
		return errCredential
	}
	id, err := uuid.Parse(h.GetTransferId())
	if err != nil {
		return errInvalid
	}
	err = g.cfg.Files.Attach(s.Context(), id, device, runtimebootstrap.NewSecret(h.GetCredential()), s)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrRuntimeCredential):
		g.cfg.Log.Warn("transfer credential rejected")
		return errCredential
	case errors.Is(err, files.ErrNotClaimed):
		return errNotClaimed
	}
	g.cfg.Log.Warn("attach transfer failed", "error", err)
	return errNotClaimed
}
