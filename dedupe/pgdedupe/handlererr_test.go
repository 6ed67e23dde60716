package pgdedupe_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe"
)

// TestHandlerErrorIsNotRetried: only the filter's own statements (begin, the done mark,
// commit) are retried. A handler's error rolls the transaction back once and is
// returned as it is, counted RolledBack, whatever it wraps: a timeout or network error
// of another system, or an error of the database that the handler returned: retrying
// would run the handler again within one delivery.
func TestHandlerErrorIsNotRetried(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name string
		err  func(ctx context.Context) error
	}{
		{"deadline of a call", func(context.Context) error {
			return fmt.Errorf("calling payments: %w", context.DeadlineExceeded)
		}},
		{"network error", func(context.Context) error { return fmt.Errorf("calling payments: %w", netErr) }},
		{"connection exception", func(context.Context) error { return &pgconn.PgError{Code: "08006", Message: "elsewhere"} }},
		{"serialization failure of its statement", func(ctx context.Context) error {
			_, err := pgdedupe.TxFrom(ctx).Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$`)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newE2E(t)
			hook := &errorHook{}
			var results []pgdedupe.TxResult
			f, err := pgdedupe.NewTxFilter(e.store, &pgdedupe.TxOptions{Entity: "orders", Retry: sbkit.RetryOptions{RetryDelay: -1},
				Hooks: []pgdedupe.Hook{hook, txResultFunc(func(r pgdedupe.TxResult) { results = append(results, r) })}})
			if err != nil {
				t.Fatal(err)
			}
			var handlerErr error
			h := wrap(t, f, func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				if err := e.work(ctx, m); err != nil {
					return err
				}
				handlerErr = tt.err(ctx)
				return handlerErr
			})
			err = h(context.Background(), &azservicebus.ReceivedMessage{MessageID: "h1"})
			if handlerErr == nil || err != handlerErr {
				t.Fatalf("Filter returned %v, want the handler's error %v as it is", err, handlerErr)
			}
			if work, marks := e.rows("h1"); e.runs.Load() != 1 || work != 0 || marks != 0 {
				t.Fatalf("handler ran %d times, %d rows, %d marks; want 1, 0, 0", e.runs.Load(), work, marks)
			}
			if st := f.Stats(); st.RolledBack != 1 || st.TxRetries != 0 || st.Failed != 0 {
				t.Fatalf("stats %+v, want one RolledBack", st)
			}
			if len(hook.ops) != 0 || len(results) != 1 || results[0].Outcome != pgdedupe.OutcomeRolledBack || results[0].Attempts != 1 {
				t.Fatalf("hooks saw database errors %v, results %+v; want none and one rolled back", hook.ops, results)
			}
		})
	}
}
