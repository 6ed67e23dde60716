package pgdedupe_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
)

// BenchmarkDedupe measures, against the PostgreSQL at SBKIT_PG_DSN, one message on a
// new key, sequentially:
//   - insert-only: the baseline, the business work alone (a one-row insert in its own
//     transaction), no duplicate protection;
//   - postgres: the plain Store, Acquire + MarkDone (two statements, autocommit);
//   - postgres-tx: the TxFilter around the same one-row insert: begin, done mark,
//     insert, commit.
func BenchmarkDedupe(b *testing.B) {
	ctx := context.Background()
	pool := newPool(b)
	s := newStore(b, pool)
	if _, err := pool.Exec(ctx, `CREATE TABLE work (message_id text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	insert := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		_, err := pgdedupe.TxFrom(ctx).Exec(ctx, `INSERT INTO work (message_id) VALUES ($1)`, m.MessageID)
		return err
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("insert-only", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			tx, err := pool.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO work (message_id) VALUES ($1)`, "base-"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("postgres", func(b *testing.B) {
		run := strconv.FormatInt(seq.Add(1), 10) + ":" // keys new in every run (-count)
		i := 0
		for b.Loop() {
			i++
			key := run + strconv.Itoa(i)
			if _, err := s.Acquire(ctx, key, "w", time.Minute); err != nil {
				b.Fatal(err)
			}
			if err := s.MarkDone(ctx, key, "w", time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
	b.Run("postgres-tx", func(b *testing.B) {
		f, err := pgdedupe.NewTxFilter(s, &pgdedupe.TxOptions{Entity: "bench" + strconv.FormatInt(seq.Add(1), 10)})
		if err != nil {
			b.Fatal(err)
		}
		h, err := f.Wrap(insert)
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			i++
			if err := h(ctx, &azservicebus.ReceivedMessage{MessageID: "tx-" + strconv.Itoa(i)}); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}
