package pgoutbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

// BenchmarkAddCommit measures what Add's NOTIFY costs the writers: 16 goroutines each
// commit transactions of one Add, with the NOTIFY in the transaction (the default),
// without it (DisableNotify, the relay polling), and without it but with Notify called
// after each commit (the wake-up outside the writer's transaction). commits/s is the
// metric.
func BenchmarkAddCommit(b *testing.B) {
	const writers = 16
	for _, mode := range []string{"notify", "none", "notify-after"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			cfg := e.pool.Config()
			cfg.MaxConns = writers
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer pool.Close()
			ob, err := pgoutbox.New(pool, &pgoutbox.Options{Schema: e.schema, DisableNotify: mode != "notify"})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return ob.Add(ctx, tx, "q", msg("", "x")) })
						if err == nil && mode == "notify-after" {
							err = ob.Notify(ctx)
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
