// Package pgtest gives tests a PostgreSQL database: where to find it (env SBKIT_PG_DSN),
// a skip (or, when env CI=true, a failure) without it, and a pool whose connections use
// a schema of their own, so that tests and concurrent test runs never share a table.
// The tests of pgdedupe, outbox/pgoutbox and the outbox example use it.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sbkit/sbkit/dedupe/storetest"
)

// DSNEnv names the variable that holds the connection string.
const DSNEnv = "SBKIT_PG_DSN"

// DefaultDSN is the connection string without DSNEnv: the local server, trust auth.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/postgres"

// DSN returns the connection string: env SBKIT_PG_DSN, else DefaultDSN.
func DSN() string {
	if d := strings.TrimSpace(os.Getenv(DSNEnv)); d != "" {
		return d
	}
	return DefaultDSN
}

var server = &storetest.External{
	What: fmt.Sprintf("PostgreSQL at %s (env %s)", DSN(), DSNEnv),
	Ping: func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, DSN())
		if err == nil {
			err = c.Ping(ctx)
			_ = c.Close(ctx)
		}
		return err
	},
}

// Require returns when PostgreSQL answers at DSN. Otherwise it skips t with a message
// saying so, or fails t when env CI=true. It asks the server once per process.
func Require(t testing.TB) {
	t.Helper()
	server.Require(t)
}

var (
	runID = strconv.FormatInt(time.Now().UnixNano(), 36)
	seq   atomic.Int64
)

// NewPool calls Require, then returns a pool whose connections use a new schema
// (search_path), and the schema's name. When t ends the schema is dropped and the pool
// closed; that close is not waited for, since pgx drains a connection whose query was
// cancelled (a component cut short on purpose) for up to 15 s first.
func NewPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	Require(t)
	ctx := context.Background()
	schema := fmt.Sprintf("sbkit_test_%s_%d", runID, seq.Add(1))
	admin, err := pgx.Connect(ctx, DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(DSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		go pool.Close()
		c, err := pgx.Connect(ctx, DSN())
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	return pool, schema
}
