package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"berth.dev/core/store"
	"berth.dev/core/store/db"
	"berth.dev/core/store/storetest"
	"berth.dev/sandbox/errdefs"
)

func migrationContext(t *testing.T) context.Context {
	t.Helper()
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// openSQL opens dsn through pgx's database/sql driver, as goose needs.
func openSQL(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	must(t, err)
	sqlDB := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = sqlDB.Close() })
	return sqlDB
}

// gooseOn returns a goose provider for the migrations in dir on dsn.
func gooseOn(t *testing.T, dsn, dir string) *goose.Provider {
	t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, openSQL(t, dsn), os.DirFS(dir),
		goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()))
	must(t, err)
	return p
}

func TestSchemaVersion(t *testing.T) {
	files, err := filepath.Glob("migrations/*.sql")
	must(t, err)
	if len(files) == 0 {
		t.Fatal("no migrations")
	}
	sort.Strings(files)
	last, err := strconv.Atoi(strings.SplitN(filepath.Base(files[len(files)-1]), "_", 2)[0])
	must(t, err)
	// Numbered without gaps from 1, so the count is the last number too.
	if got := store.SchemaVersion(); got != int64(last) || last != len(files) {
		t.Errorf("SchemaVersion() = %d, last file %d, %d files", got, last, len(files))
	}
}

func TestMigrateTwiceIsNoop(t *testing.T) {
	ctx := migrationContext(t)
	dsn := storetest.NewDatabase(t)
	must(t, store.Migrate(ctx, dsn))
	st, err := store.Open(ctx, dsn)
	must(t, err)
	defer st.Close()
	want, err := st.ClaimInstallation(ctx, newUUID(t), "https://core.example")
	must(t, err)

	must(t, store.Migrate(ctx, dsn))
	must(t, store.CheckSchema(ctx, st.Pool()))
	got, err := st.Reader().GetInstallation(ctx)
	must(t, err)
	if got != want {
		t.Errorf("after a second Migrate the installation is %+v, want %+v", got, want)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	ctx := migrationContext(t)
	dsn := storetest.NewDatabase(t)
	const cores = 3
	errs := make([]error, cores)
	var wg sync.WaitGroup
	for i := range cores {
		wg.Go(func() { errs[i] = store.Migrate(ctx, dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	st, err := store.Open(ctx, dsn)
	must(t, err)
	defer st.Close()
	must(t, store.CheckSchema(ctx, st.Pool()))
}

func TestCheckSchemaRefusesNewer(t *testing.T) {
	ctx := migrationContext(t)
	dsn := storetest.NewDatabase(t)
	must(t, store.Migrate(ctx, dsn))
	// A newer binary migrated the database further.
	if _, err := gooseOn(t, dsn, "testdata/future").Up(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, dsn)
	must(t, err)
	defer st.Close()

	err = store.CheckSchema(ctx, st.Pool())
	wantClass(t, err, errdefs.ErrInvalid)
	if want := fmt.Sprintf("schema version 9999 is newer than this binary (%d)", store.SchemaVersion()); !strings.Contains(err.Error(), want) {
		t.Errorf("CheckSchema: %q lacks %q", err, want)
	}
	err = store.Migrate(ctx, dsn)
	wantClass(t, err, errdefs.ErrInvalid)
	if !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("Migrate on a newer schema: %v", err)
	}
}

func TestCheckSchemaRefusesOlder(t *testing.T) {
	ctx := migrationContext(t)
	dsn := storetest.NewDatabase(t)
	st, err := store.Open(ctx, dsn)
	must(t, err)
	defer st.Close()

	// Never migrated: refused, and left as it was.
	err = store.CheckSchema(ctx, st.Pool())
	wantClass(t, err, errdefs.ErrInvalid)
	if !strings.Contains(err.Error(), "run berth-core migrate") {
		t.Errorf("CheckSchema on an empty database: %v", err)
	}
	wantClass(t, store.CheckSchema(ctx, st.Pool()), errdefs.ErrInvalid)

	// Goose's version table exists (version 0) but none of our migrations
	// ran: an older schema.
	if _, err := gooseOn(t, dsn, "testdata/future").GetDBVersion(ctx); err != nil {
		t.Fatal(err)
	}
	err = store.CheckSchema(ctx, st.Pool())
	wantClass(t, err, errdefs.ErrInvalid)
	if want := fmt.Sprintf("schema version 0 is older than this binary (%d): run berth-core migrate", store.SchemaVersion()); !strings.Contains(err.Error(), want) {
		t.Errorf("CheckSchema: %q lacks %q", err, want)
	}
}

func TestConnectionErrorsHideThePassword(t *testing.T) {
	ctx := migrationContext(t)
	const password = "hunter2-do-not-print"
	for _, tt := range []struct {
		dsn   string
		class error
	}{
		{"postgres://berth:" + password + "@/berth?host=/nonexistent-berth-socket-dir&connect_timeout=2", errdefs.ErrObservationUnavailable},
		{"postgres://berth:" + password + "@[::1/berth", errdefs.ErrInvalid},
		{"host=/nonexistent-berth-socket-dir user=berth password=" + password + " connect_timeout=2", errdefs.ErrObservationUnavailable},
	} {
		err := store.Migrate(ctx, tt.dsn)
		wantClass(t, err, tt.class)
		_, openErr := store.Open(ctx, tt.dsn)
		wantClass(t, openErr, tt.class)
		for _, e := range []error{err, openErr} {
			if strings.Contains(e.Error(), password) {
				t.Errorf("error text carries the password: %v", e)
			}
		}
	}
}

func TestInTxRollsBack(t *testing.T) {
	st, ctx := newStore(t)
	boom := errors.New("boom")
	id := tokenID(t)
	err := st.InTx(ctx, func(q *db.Queries) error {
		if _, err := q.CreateEnrollmentToken(ctx, db.CreateEnrollmentTokenParams{ID: id, SecretHash: hash([]byte("s")), TTLMicros: 1e9}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("InTx returned %v, want fn's error", err)
	}
	_, err = st.GetEnrollmentToken(ctx, id)
	wantClass(t, err, errdefs.ErrNotFound)
}
