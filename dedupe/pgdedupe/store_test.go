package pgdedupe_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/dedupe/storetest"
)

var seq atomic.Int64 // makes names unique within the process

// newPool returns a pool whose connections use a schema of their own (pgtest.NewPool).
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := pgtest.NewPool(t)
	return pool
}

// newStore returns a store with the default table on pool, the table created.
func newStore(t testing.TB, pool *pgxpool.Pool) *pgdedupe.Store {
	t.Helper()
	return newStoreWith(t, pool, nil)
}

// newStoreWith is newStore with opts.
func newStoreWith(t testing.TB, pool *pgxpool.Pool, opts *pgdedupe.Options) *pgdedupe.Store {
	t.Helper()
	s, err := pgdedupe.New(pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchema(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	pool := newPool(t)  // one schema for the suite, a table per subtest
	var tables sync.Map // *testing.T -> table name
	storetest.Run(t, func(t *testing.T) dedupe.Store {
		name, _ := tables.LoadOrStore(t, fmt.Sprintf("t%d", seq.Add(1)))
		return newStoreWith(t, pool, &pgdedupe.Options{Table: name.(string)}) // another client of the same table
	}, &storetest.Options{TTL: 300 * time.Millisecond})
}

func TestNewAndCreateSchema(t *testing.T) {
	pool := newPool(t)
	s, err := pgdedupe.New(pool, &pgdedupe.Options{Table: "marks"})
	if err != nil {
		t.Fatal(err)
	}
	// Idempotent, and safe from many processes at once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.CreateSchema(context.Background()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Table() != `"marks"` {
		t.Fatalf("table %s", s.Table())
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_indexes WHERE tablename = 'marks'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d indexes, %v; want the primary key and the expiry index", n, err)
	}
}

func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t)
	s := newStore(t, pool)
	for i := range 25 {
		if err := s.MarkDone(ctx, fmt.Sprint("old", i), "w", time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkDone(ctx, "live", "w", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the database's clock passes the marks' expiry
	n, err := s.DeleteExpired(ctx, 10)
	if err != nil || n != 25 {
		t.Fatalf("deleted %d, %v; want 25", n, err)
	}
	if st, err := s.Acquire(ctx, "live", "x", time.Minute); err != nil || st != dedupe.Done {
		t.Fatalf("live mark: %v, %v", st, err)
	}
}

func TestNewNil(t *testing.T) {
	if _, err := pgdedupe.New(nil, nil); !errors.Is(err, pgdedupe.ErrNilPool) {
		t.Fatalf("New(nil pool) = %v, want ErrNilPool", err)
	}
	if _, err := pgdedupe.NewTxFilter(nil, nil); !errors.Is(err, pgdedupe.ErrNilStore) {
		t.Fatalf("NewTxFilter(nil store) = %v, want ErrNilStore", err)
	}
}
