package store

// The observed views (storeobs) are generated from this package's method
// sets.
//go:generate go run ./internal/gendecorate

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"berth.dev/core/store/db"
	"berth.dev/core/store/pgerr"
	"berth.dev/sandbox/errdefs"
)

// MaxPageSize bounds every list call, so one request never reads an
// unbounded number of rows. A keyset list call (limitParam) may read one
// row more, the row a pager reads past a full page to learn whether
// another page follows.
const MaxPageSize = 1000

// handle is the connection pool and the queries sqlc generated for it,
// which every store type shares; its methods are unexported, so a store
// type's exported method set is only what its authority allows.
type handle struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// Store is Core's access to PostgreSQL: the pool, the start-up writes that
// make the authority of the others (installation, owner epoch, execution
// lease, CA) and the typed views on it (Reader, AsOwner, Admin, Runtime).
type Store struct {
	handle
}

// New returns a Store over pool; the Store owns pool from then on and
// Close closes it.
func New(pool *pgxpool.Pool) *Store {
	return &Store{handle{pool: pool, q: db.New(pool)}}
}

// Open connects to the database at dsn and returns a Store once the
// database answers. It does not check the schema; call CheckSchema.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The parser's text may quote parts of the URL; it is dropped.
		return nil, fmt.Errorf("open store: %w", errdefs.Invalid("database_url", "cannot be parsed"))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", pgerr.Classify(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", pgerr.Classify(err))
	}
	return New(pool), nil
}

// Pool returns the connection pool, for CheckSchema and callers that need
// a database handle of their own.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the connection pool.
func (s *Store) Close() { s.pool.Close() }

// InTx runs fn in one transaction (read committed) on queries bound to it
// and commits when fn returns nil; any error rolls everything back. Errors
// from fn come back as fn returned them, database errors classified. No
// transaction may span provider or network I/O: fn only talks to the
// database.
func (s *Store) InTx(ctx context.Context, fn func(q *db.Queries) error) error {
	return s.inTx(ctx, fn)
}

// inTx is InTx for every store type.
func (s handle) inTx(ctx context.Context, fn func(q *db.Queries) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return fn(s.q.WithTx(tx))
	})
	return pgerr.Classify(err)
}

// wrap classifies a database error and names the operation that failed.
func wrap(op string, err error) error {
	return fmt.Errorf("%s: %w", op, pgerr.Classify(err))
}

// ttlMicros converts a lifetime to the whole microseconds the database
// adds to now(). A lifetime under a microsecond is refused.
func ttlMicros(field string, ttl time.Duration) (int64, error) {
	if ttl < time.Microsecond {
		return 0, errdefs.Invalid(field, "must be at least one microsecond")
	}
	return ttl.Microseconds(), nil
}

// epochParam converts an owner epoch to its bigint column.
func epochParam(epoch uint64) (int64, error) {
	if epoch == 0 || epoch > math.MaxInt64 {
		return 0, errdefs.Invalid("owner_epoch", "must be between 1 and 2^63-1")
	}
	return int64(epoch), nil
}

// pageSizeParam checks a list call's page size.
func pageSizeParam(n int) (int32, error) {
	if n < 1 || n > MaxPageSize {
		return 0, errdefs.Invalid("page_size", fmt.Sprintf("must be between 1 and %d", MaxPageSize))
	}
	return int32(n), nil
}

// listPage runs one keyset list query of op that a pager drives: it
// checks limit (limitParam), then fetchRows.
func listPage[R, T any](op string, limit int, fetch func(n int32) ([]R, error), conv func(R) T) ([]T, error) {
	n, err := limitParam(limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return fetchRows(op, func() ([]R, error) { return fetch(n) }, conv)
}

// fetchRows runs one query of op that returns rows and converts each, so
// every list call shares one shape and one error form.
func fetchRows[R, T any](op string, fetch func() ([]R, error), conv func(R) T) ([]T, error) {
	rows, err := fetch()
	if err != nil {
		return nil, wrap(op, err)
	}
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = conv(r)
	}
	return out, nil
}

// nodePageParam checks the row limit of a per-node lifecycle scan.
func nodePageParam(op string, limit int) (int32, error) {
	if limit < 1 || limit > NodePageSize {
		return 0, fmt.Errorf("%s: %w", op, errdefs.Invalid("limit", fmt.Sprintf("must be between 1 and %d", NodePageSize)))
	}
	return int32(limit), nil
}

// limitParam checks the row limit of a keyset list call that a pager
// drives: a page and the one row past it (core/admin.Paginate).
func limitParam(n int) (int32, error) {
	if n < 1 || n > MaxPageSize+1 {
		return 0, errdefs.Invalid("limit", fmt.Sprintf("must be between 1 and %d", MaxPageSize+1))
	}
	return int32(n), nil
}
