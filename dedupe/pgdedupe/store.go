package pgdedupe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/dedupe"
)

// DefaultTable is the table Options.Table defaults to.
const DefaultTable = "sbkit_dedupe"

var (
	// ErrInvalidOptions is wrapped by NewTxFilter's error for options it cannot use.
	ErrInvalidOptions = errors.New("pgdedupe: invalid options")
	// ErrNilPool is returned by New for a nil pool.
	ErrNilPool = errors.New("pgdedupe: nil pool")
	// ErrNilStore is returned by NewTxFilter for a nil store.
	ErrNilStore = errors.New("pgdedupe: nil store")
)

// Options configures a Store. nil options, and zero fields, mean the defaults.
type Options struct {
	// Schema is the schema of the table; "" (the default) means the connection's
	// search_path.
	Schema string
	// Table is the table's name. Default: DefaultTable ("sbkit_dedupe").
	Table string
}

// Store is a [dedupe.Store] on PostgreSQL: one row per key, written by single
// statements (an INSERT ... ON CONFLICT DO UPDATE ... WHERE for Acquire and MarkDone), so
// each method is atomic for its key across processes. It is safe for concurrent use;
// it owns no goroutine (the pool is the caller's, and so is closing it).
//
// Errors: bad arguments give [dedupe.ErrInvalidArgument], as [dedupe.Store] says; a done
// context gives the context's error; database errors are returned wrapped (the
// [dedupe.Filter] retries them according to its own options).
type Store struct {
	pool  *pgxpool.Pool
	table string // quoted, schema-qualified

	acquire, acquireState, markDone, markState, release, deleteExpired string
}

var _ dedupe.Store = (*Store)(nil)

// New returns a Store on pool (the caller's, which it does not close). nil options mean
// defaults. It returns [ErrNilPool] for a nil pool. It does not create the table: call
// CreateSchema (or run its SQL in your migrations).
func New(pool *pgxpool.Pool, opts *Options) (*Store, error) {
	if pool == nil {
		return nil, ErrNilPool
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	id := pgx.Identifier{o.Table}
	if o.Schema != "" {
		id = pgx.Identifier{o.Schema, o.Table}
	}
	t := id.Sanitize()
	s := &Store{pool: pool, table: t}
	// $3 is a duration in microseconds: the entry expires $3 after the database's now().
	s.acquire = `INSERT INTO ` + t + ` AS d (key, owner, done, expires_at)
VALUES ($1, $2, false, now() + $3 * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, done = false, expires_at = excluded.expires_at
WHERE d.expires_at <= now() OR (NOT d.done AND d.owner = excluded.owner)
RETURNING true`
	s.acquireState = `SELECT done FROM ` + t + ` WHERE key = $1 AND expires_at > now()`
	s.markDone = `INSERT INTO ` + t + ` AS d (key, owner, done, expires_at)
VALUES ($1, NULL, true, now() + $3 * interval '1 microsecond')
ON CONFLICT (key) DO UPDATE SET owner = NULL, done = true, expires_at = excluded.expires_at
WHERE d.expires_at <= now() OR (NOT d.done AND d.owner = $2)
RETURNING true`
	s.markState = `SELECT done, owner FROM ` + t + ` WHERE key = $1 AND expires_at > now()`
	s.release = `DELETE FROM ` + t + ` WHERE key = $1 AND owner = $2 AND NOT done AND expires_at > now()`
	s.deleteExpired = `DELETE FROM ` + t + ` WHERE ctid IN (
SELECT ctid FROM ` + t + ` WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED)`
	return s, nil
}

// Table returns the quoted, schema-qualified name of the store's table.
func (s *Store) Table() string { return s.table }

// CreateSchema creates the store's table and its expiry index unless they exist (the
// schema, when Options.Schema names one, must exist). It is idempotent: safe to call at
// every start, from many processes at once.
func (s *Store) CreateSchema(ctx context.Context) error {
	index := pgx.Identifier{strings.Trim(s.lastName(), `"`) + "_expires_at"}.Sanitize()
	// A transaction-level advisory lock serializes concurrent first runs: CREATE ... IF
	// NOT EXISTS alone can still collide on the catalog's unique index.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, s.table); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	key        text PRIMARY KEY,
	owner      text,
	done       boolean NOT NULL,
	expires_at timestamptz NOT NULL
)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE INDEX IF NOT EXISTS `+index+` ON `+s.table+` (expires_at)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgdedupe: create schema: %w", err)
	}
	return nil
}

// lastName returns the quoted table name without its schema.
func (s *Store) lastName() string {
	if i := strings.LastIndex(s.table, `"."`); i >= 0 {
		return s.table[i+2:]
	}
	return s.table
}

// Acquire implements [dedupe.Store.Acquire].
func (s *Store) Acquire(ctx context.Context, key, owner string, lease time.Duration) (dedupe.State, error) {
	if err := dedupe.CheckArgs(key, owner, lease); err != nil {
		return 0, err
	}
	// The upsert takes the key when it is absent, expired, or owner's lease; otherwise
	// the live entry says why not. Between the two statements the entry may expire:
	// then the upsert is tried again.
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var ok bool
		err := s.pool.QueryRow(ctx, s.acquire, key, owner, lease.Microseconds()).Scan(&ok)
		if err == nil {
			return dedupe.Acquired, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, s.wrap("acquire", err)
		}
		var done bool
		err = s.pool.QueryRow(ctx, s.acquireState, key).Scan(&done)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case err != nil:
			return 0, s.wrap("acquire", err)
		case done:
			return dedupe.Done, nil
		}
		return dedupe.InProgress, nil
	}
}

// MarkDone implements [dedupe.Store.MarkDone].
func (s *Store) MarkDone(ctx context.Context, key, owner string, window time.Duration) error {
	if err := dedupe.CheckArgs(key, owner, window); err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var ok bool
		err := s.pool.QueryRow(ctx, s.markDone, key, owner, window.Microseconds()).Scan(&ok)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return s.wrap("mark done", err)
		}
		var (
			done bool
			held *string
		)
		err = s.pool.QueryRow(ctx, s.markState, key).Scan(&done, &held)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue
		case err != nil:
			return s.wrap("mark done", err)
		case done:
			return nil
		}
		return fmt.Errorf("pgdedupe: key %q: %w", key, dedupe.ErrNotOwner)
	}
}

// Release implements [dedupe.Store.Release].
func (s *Store) Release(ctx context.Context, key, owner string) error {
	if err := dedupe.CheckArgs(key, owner, 1); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.release, key, owner); err != nil {
		return s.wrap("release", err)
	}
	return nil
}

// DefaultCleanupBatch is DeleteExpired's batch size when it is given 0.
const DefaultCleanupBatch = 1000

// DeleteExpired deletes expired rows (leases and done marks past their expiry) in
// batches of at most batch rows (0 means DefaultCleanupBatch), each its own short
// statement that skips rows other transactions have locked, until none is left or ctx
// ends. It returns how many rows it deleted. Expired rows already behave as absent, so
// this only reclaims space: run it from one worker every few minutes.
func (s *Store) DeleteExpired(ctx context.Context, batch int) (int64, error) {
	if batch <= 0 {
		batch = DefaultCleanupBatch
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.deleteExpired, batch)
		if err != nil {
			return total, s.wrap("delete expired", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) {
			return total, nil
		}
	}
}

func (s *Store) wrap(op string, err error) error {
	return fmt.Errorf("pgdedupe: %s: %w", op, err)
}
