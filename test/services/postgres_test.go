package services

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"berth.dev/sandbox/testenv"
)

func TestPostgres(t *testing.T) {
	url := testenv.DatabaseURL(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })

	var version int
	if err := conn.QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		t.Fatalf("server version: %v", err)
	}
	t.Logf("server_version_num %d", version)
	if version < 150000 {
		t.Fatalf("PostgreSQL server_version_num %d < 150000: PostgreSQL 15 or newer is required", version)
	}

	if _, err := conn.Exec(ctx, "create temp table smoke (id int primary key, body text not null)"); err != nil {
		t.Fatalf("create temp table: %v", err)
	}
	const body = "berth smoke ✓"
	if _, err := conn.Exec(ctx, "insert into smoke (id, body) values ($1, $2)", 1, body); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got string
	if err := conn.QueryRow(ctx, "select body from smoke where id = $1", 1).Scan(&got); err != nil {
		t.Fatalf("select: %v", err)
	}
	if got != body {
		t.Fatalf("round trip returned %q, want %q", got, body)
	}
}
