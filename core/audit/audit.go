package audit

import (
	"context"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"

	"berth.dev/core/admin"
	"berth.dev/core/store"
)

// Provenance is who and which request an event records (store.Provenance):
// made only by From and Core.
type Provenance = store.Provenance

// Writes are the store writes only this package calls, and the
// Provenance constructors only it calls.
var Writes = []string{
	"RecordAuditEvent", "ExpireAuditEvents",
	"NewAdminProvenance", "NewKeyProvenance", "NewCoreProvenance",
}

// From is the Provenance of the admin call of ctx: its principal (the
// administrator, or a verified project key with its project) and its
// request id. Outside an authenticated admin call it is the zero
// Provenance, which every audited write refuses.
func From(ctx context.Context) Provenance {
	p, id := admin.PrincipalFrom(ctx), admin.RequestIDFrom(ctx)
	if id == uuid.Nil {
		return Provenance{}
	}
	if p.Admin() {
		return store.NewAdminProvenance(id)
	}
	if k, ok := p.Key(); ok {
		return store.NewKeyProvenance(k.ID, k.TenantID, k.ProjectID, id)
	}
	return Provenance{}
}

// Core is the Provenance of Core's own decision for reason (a snake_case
// word: "owner_failure"), under a fresh request id.
func Core(reason string) Provenance {
	id, err := uuid.NewRandom()
	if err != nil {
		return Provenance{}
	}
	return store.NewCoreProvenance(reason, id)
}

// callProvenance is the Provenance of a finished call c.
func callProvenance(c admin.Call) Provenance {
	if c.RequestID == uuid.Nil {
		return Provenance{}
	}
	if c.Admin {
		return store.NewAdminProvenance(c.RequestID)
	}
	if c.Key.ID != uuid.Nil {
		return store.NewKeyProvenance(c.Key.ID, c.Key.TenantID, c.Key.ProjectID, c.RequestID)
	}
	return Provenance{}
}

// causeAttr labels a failure counter by its cause.
func causeAttr(cause string) attribute.KeyValue { return attribute.String("cause", cause) }
