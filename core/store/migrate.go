package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLockID is the key of the session-level advisory lock held while
// migrating, so two Cores (or two `berth-core migrate` runs) never migrate
// one database at once. It is the ASCII of "berthmig".
const migrationLockID int64 = 0x62657274686d6967

// migrationLockWait is how long Migrate waits for another migration to
// finish, polling once a second.
const migrationLockWait = 600

// newMigrator returns a goose provider for the embedded migrations over
// sqlDB. It does no I/O. Goose's global registry of Go migrations is
// ignored: every migration is an embedded SQL file.
func newMigrator(sqlDB *sql.DB, withLock bool) (*goose.Provider, error) {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	}
	if withLock {
		locker, err := lock.NewPostgresSessionLocker(
			lock.WithLockID(migrationLockID),
			lock.WithLockTimeout(1, migrationLockWait),
			lock.WithUnlockTimeout(1, 60))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	return goose.NewProvider(goose.DialectPostgres, sqlDB, files, opts...)
}

// SchemaVersion is the newest schema version this binary knows: the
// version of its last embedded migration (goose's numbering, the file
// name's leading number).
func SchemaVersion() int64 {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil || len(names) == 0 {
		panic("store: no embedded migrations") // a build defect
	}
	var newest int64
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			panic("store: embedded migration " + name + ": " + err.Error())
		}
		newest = max(newest, v)
	}
	return newest
}

// Migrate applies every embedded migration the database at dsn lacks, in
// order, each in its own transaction, holding an advisory lock for the
// whole run, and then checks the result as CheckSchema does: a database
// migrated by a newer binary is refused, never touched.
func Migrate(ctx context.Context, dsn string) error {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("migrate: %w", errdefs.Invalid("database_url", "cannot be parsed"))
	}
	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	p, err := newMigrator(sqlDB, true)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		var partial *goose.PartialError
		if errors.As(err, &partial) && partial.Failed != nil && partial.Failed.Source != nil {
			return fmt.Errorf("migrate: version %d: %w", partial.Failed.Source.Version, pgerr.Classify(err))
		}
		return fmt.Errorf("migrate: %w", pgerr.Classify(err))
	}
	if err := checkSchema(ctx, sqlDB, p); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// CheckSchema refuses a database whose schema differs from the one this
// binary was built for: a version newer than the binary's (a newer Core
// migrated it; running would misread its rows) or any embedded migration
// not applied ("run berth-core migrate"). Both are ErrInvalid. It only
// reads: an unmigrated database is refused, not initialized.
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	sqlDB := stdlib.OpenDBFromPool(pool) // closing it leaves pool open
	defer sqlDB.Close()
	p, err := newMigrator(sqlDB, false)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	if err := checkSchema(ctx, sqlDB, p); err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	return nil
}

// checkSchema compares the versions recorded in goose's version table with
// p's migrations. It reads the table through goose's own store, without
// creating it.
func checkSchema(ctx context.Context, sqlDB *sql.DB, p *goose.Provider) error {
	sources := p.ListSources()
	known := SchemaVersion()
	versions, err := database.NewStore(goose.DialectPostgres, goose.DefaultTablename)
	if err != nil {
		return err
	}
	if ext, ok := versions.(database.StoreExtender); ok {
		exists, err := ext.TableExists(ctx, sqlDB)
		if err != nil {
			return pgerr.Classify(err)
		}
		if !exists {
			return fmt.Errorf("database has no Berth schema: run berth-core migrate: %w", errdefs.ErrInvalid)
		}
	}
	rows, err := versions.ListMigrations(ctx, sqlDB)
	if err != nil {
		return pgerr.Classify(err)
	}
	// Rows come newest first; the first row of a version is its state.
	applied := make(map[int64]bool, len(rows))
	var newest int64
	for _, r := range rows {
		if _, seen := applied[r.Version]; seen {
			continue
		}
		applied[r.Version] = r.IsApplied
		if r.IsApplied && r.Version > newest {
			newest = r.Version
		}
	}
	if newest > known {
		return fmt.Errorf("schema version %d is newer than this binary (%d): %w", newest, known, errdefs.ErrInvalid)
	}
	for _, s := range sources {
		if !applied[s.Version] {
			return fmt.Errorf("schema version %d is older than this binary (%d): run berth-core migrate: %w",
				newest, known, errdefs.ErrInvalid)
		}
	}
	return nil
}
