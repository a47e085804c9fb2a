package turns_test

import (
	"testing"

	"github.com/google/uuid"

	"berth.dev/core/secrets"
	"berth.dev/core/turns"
	"berth.dev/sandbox/redacttest"
)

// TestServiceNeverPrintsItsKeys prints the Service, which holds the
// master key and the request digest key, through fmt and slog, alone and
// held, and looks for either key.
func TestServiceNeverPrintsItsKeys(t *testing.T) {
	key, raw, err := secrets.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	svc := turns.New(nil, key, uuid.New(), uuid.New, nil)
	redacttest.Check(t, *svc, raw, key.Derive("turn-request-digest"))
}
