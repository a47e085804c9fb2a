package installation_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"berth.dev/sandbox"

	"berth.dev/core/installation"
	"berth.dev/core/store"
	"berth.dev/core/store/storetest"
)

func TestGetReadsTheDatabaseEveryCall(t *testing.T) {
	st := storetest.New(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	inst, err := st.ClaimInstallation(ctx, uuid.New(), "https://core.example")
	if err != nil {
		t.Fatal(err)
	}
	svc := installation.New(st, 7, "ab12", "dev")

	got, err := svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := installation.Installation{ID: inst.ID.String(), PublicURL: "https://core.example", CreateTime: inst.CreatedAt,
		OwnerEpoch: 7, CAFingerprint: "ab12", CoreVersion: "dev"}
	if got != want {
		t.Fatalf("before a commit: %+v, want %+v", got, want)
	}

	// A commit shows at the next call: the generation is read, not kept.
	if _, err := st.CommitGeneration(ctx, storetest.Seen(t, st), store.NewGeneration{
		ProviderKind: "docker", PublicConfig: json.RawMessage(`{}`), Observations: json.RawMessage(`{}`),
		Specification: sandbox.Specification{Resources: sandbox.Resources{CPUMillis: 1000, MemoryBytes: 1 << 30, DiskBytes: 4 << 30}, MaxActive: 1},
	}); err != nil {
		t.Fatal(err)
	}
	got, err = svc.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeploymentGeneration != 1 {
		t.Fatalf("after a commit: generation %d, want 1", got.DeploymentGeneration)
	}
}
