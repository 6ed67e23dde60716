package pgoutbox_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe/pgdedupe/pgtest"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// listening waits until a connection of the database listens on ob's channel.
func (e *env) listening() {
	e.t.Helper()
	eventually(e.t, "a relay to LISTEN", func() bool {
		var n int
		err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND query = $1`, "LISTEN "+pgx.Identifier{e.ob.Channel()}.Sanitize()).Scan(&n)
		return err == nil && n > 0
	})
}

// TestNotifyWakesRelay: with polling an hour apart, a commit reaches the broker because
// Add's NOTIFY wakes the relay.
func TestNotifyWakesRelay(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	r, _ := e.relay(&pgoutbox.RelayOptions{PollInterval: time.Hour})
	e.listening()
	for i := range 3 {
		e.add("q", msg(idOf("n", i, 0), "x"))
		eventually(t, "the message", func() bool { return q.Counts().Active == i+1 })
	}
	if st := r.Stats(); st.Wakeups < 3 {
		t.Fatalf("stats %+v, want a wakeup per commit", st)
	}
}

// TestPollingWithoutListen: DisableListen leaves no LISTEN connection; the relay finds
// the rows by polling.
func TestPollingWithoutListen(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	r, _ := e.relay(&pgoutbox.RelayOptions{DisableListen: true, PollInterval: 10 * time.Millisecond})
	e.add("q", msg("p", "x"))
	eventually(t, "the message", func() bool { return q.Counts().Active == 1 })
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'
		AND datname = current_database() AND query LIKE '%'||$1||'%'`, e.ob.Channel()).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d LISTEN connections (%v), want none", n, err)
	}
	if st := r.Stats(); st.Wakeups != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestLifecycle: Run after Close, Run twice at once, Close twice and Close without Run;
// Run's context ending returns its cause; no goroutine remains.
func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", &sbtest.EntityOptions{})
	r, err := pgoutbox.NewRelay(e.ob, e.destinations, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	e.listening()
	if err := r.Run(context.Background()); !errors.Is(err, pgoutbox.ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	e.add("q", msg("a", "x"))
	eventually(t, "the message", func() bool { return q.Counts().Active == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	go func() { done <- r.Run(context.Background()) }() // again after it returned
	e.listening()
	for range 2 {
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close = %v", err)
	}
	if err := r.Run(context.Background()); !errors.Is(err, pgoutbox.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
	r2, _ := pgoutbox.NewRelay(e.ob, e.destinations, nil)
	if err := r2.Close(context.Background()); err != nil {
		t.Fatalf("Close without Run = %v", err)
	}
}

// TestCloseCutsShort: Close with a context that ends while a send hangs cancels it,
// releases the row at once (attempts unchanged), and returns the context's error; the
// next relay sends the row.
func TestCloseCutsShort(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", nil)
	var hung atomic.Bool
	a, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{Sender: hangOnce(q, &hung)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	e.add("q", msg("h", "x"))
	eventually(t, "the send to start", hung.Load)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the context's error", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Released as it was: no attempt counted, and nobody holds it (NOWAIT fails on a
	// locked row).
	var attempts int
	if err := e.pool.QueryRow(context.Background(), `SELECT attempts FROM `+e.ob.Table()+` FOR UPDATE NOWAIT`).Scan(&attempts); err != nil ||
		attempts != 0 {
		t.Fatalf("row: attempts %d, %v; want released as it was", attempts, err)
	}
	if st := a.Stats(); st.Released != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v", st)
	}
	e.relay(nil)
	e.drained()
	if active := q.Counts().Active; active != 1 {
		t.Fatalf("broker holds %d", active)
	}
}

// hangOnce makes the next send to q hang until its context ends, and returns sender
// options whose hook sets hung when a send starts.
func hangOnce(q *sbtest.Entity, hung *atomic.Bool) *sender.Options {
	q.InjectFault(sbtest.Fault{Op: sbtest.OpSend, Count: 1, Hang: true})
	return &sender.Options{Hooks: []sender.Hook{startFunc(func() { hung.Store(true) })}}
}

// startFunc is a sender.SendStartHook that calls f.
type startFunc func()

func (f startFunc) OnSendStart(ctx context.Context, _ sender.SendStart) context.Context {
	f()
	return ctx
}

// TestDatabaseDown: claims that fail are reported (a *RelayError wrapping the
// database's error) and retried; the relay still closes promptly.
func TestDatabaseDown(t *testing.T) {
	pgtest.Require(t)
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	leakCheck(t)
	ob, err := pgoutbox.New(pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	var claims atomic.Int64
	var first atomic.Pointer[pgoutbox.RelayError]
	h := pgoutbox.RelayErrorHookFunc(func(_ context.Context, err *pgoutbox.RelayError) {
		var pgErr *pgconn.ConnectError
		if err.Op == "claim" && errors.As(err, &pgErr) && err.Retry > 0 {
			first.CompareAndSwap(nil, err)
			claims.Add(1)
		}
	})
	r, err := pgoutbox.NewRelay(ob, func(string) (sbkit.MessageSender, error) { return nil, errors.New("unused") },
		&pgoutbox.RelayOptions{Hooks: []pgoutbox.Hook{h}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	eventually(t, "two failed claims", func() bool { return claims.Load() >= 2 })
	if msg := first.Load().Error(); !strings.HasPrefix(msg, "pgoutbox: relay claim failed, retrying in ") {
		t.Errorf("RelayError.Error() = %q", msg)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.DBErrors < 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRelayErrorText: a RelayError names the call, its rows and the wait, and unwraps
// to the database's error.
func TestRelayErrorText(t *testing.T) {
	dbErr := errors.New("connection reset")
	for _, tt := range []struct {
		err  *pgoutbox.RelayError
		want string
	}{
		{&pgoutbox.RelayError{Op: "mark", Rows: 3, Err: dbErr}, "pgoutbox: relay mark failed (3 row(s)): connection reset"},
		{&pgoutbox.RelayError{Op: "listen", Retry: time.Second, Err: dbErr}, "pgoutbox: relay listen failed, retrying in 1s: connection reset"},
	} {
		if got := tt.err.Error(); got != tt.want || !errors.Is(tt.err, dbErr) {
			t.Errorf("Error() = %q (errors.Is %v), want %q", got, errors.Is(tt.err, dbErr), tt.want)
		}
	}
}

// misspelt has OnRelayErrors instead of OnRelayError: it implements no hook interface.
type misspelt struct{}

func (misspelt) OnRelayErrors(context.Context, *pgoutbox.RelayError) {}

// TestNewRelayErrors: nil dependencies are their sentinels; invalid options, and hooks
// of no hook interface, fail at construction; the negative values that mean no limit
// are accepted.
func TestNewRelayErrors(t *testing.T) {
	e := newEnv(t)
	if _, err := pgoutbox.NewRelay(nil, e.destinations, nil); err != pgoutbox.ErrNilOutbox {
		t.Fatalf("nil outbox: %v", err)
	}
	if _, err := pgoutbox.NewRelay(e.ob, nil, nil); err != pgoutbox.ErrNilDestinations {
		t.Fatalf("nil destinations: %v", err)
	}
	if _, err := pgoutbox.New(nil, nil); err != pgoutbox.ErrNilPool {
		t.Fatalf("nil pool: %v", err)
	}
	for _, o := range []pgoutbox.RelayOptions{{Lease: -1}, {ClaimBatch: -1}, {MaxInFlight: -1}, {MaxInFlightBytes: -1}, {MaxOpenClaims: -1},
		{PollInterval: -1}, {Sender: &sender.Options{MaxInFlightMessages: -1}},
		{Hooks: []pgoutbox.Hook{misspelt{}}}, {Hooks: []pgoutbox.Hook{nil}}} {
		if _, err := pgoutbox.NewRelay(e.ob, e.destinations, &o); !errors.Is(err, pgoutbox.ErrInvalidOptions) {
			t.Errorf("NewRelay(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	if _, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{ShutdownGrace: -1,
		Hooks: []pgoutbox.Hook{pgoutbox.RelayResultHookFunc(func(context.Context, pgoutbox.RelayResult) {})}}); err != nil {
		t.Errorf("NewRelay(ShutdownGrace -1, a RelayResultHookFunc) = %v", err)
	}
}

// TestShutdownGraceNegative: with a negative ShutdownGrace, the end of Run's context
// lets a send in flight finish, however long it takes (here: one attempt that hangs
// until the sender's AttemptTimeout, then its retry), instead of cutting it short.
func TestShutdownGraceNegative(t *testing.T) {
	e := newEnv(t)
	leakCheck(t)
	q := e.queue("q", nil)
	var hung atomic.Bool
	so := hangOnce(q, &hung)
	so.AttemptTimeout = 300 * time.Millisecond
	r, err := pgoutbox.NewRelay(e.ob, e.destinations, &pgoutbox.RelayOptions{ShutdownGrace: -1, Sender: so})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	e.add("q", msg("g", "x"))
	eventually(t, "the send to start", hung.Load)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if st := r.Stats(); st.Sent != 1 || st.Released != 0 || st.InFlight != 0 {
		t.Fatalf("stats %+v, want the row sent", st)
	}
	n, _ := e.count()
	if active := q.Counts().Active; n != 0 || active != 1 {
		t.Fatalf("%d rows left, broker holds %d; want 0 and 1", n, active)
	}
}

// destHook counts the accepted sends of one destination.
type destHook struct {
	dest string
	n    *sync.Map // dest -> *atomic.Int64
}

func (h destHook) OnSendResult(_ context.Context, e sender.SendResult) {
	if e.Err == nil {
		v, _ := h.n.LoadOrStore(h.dest, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
}

// TestSenderHooksPerDestination: RelayOptions.SenderHooks is asked once per destination,
// and its hooks see that destination's sends (where OpenTelemetry's sender hook goes).
func TestSenderHooksPerDestination(t *testing.T) {
	e := newEnv(t)
	e.queue("a", nil)
	e.queue("b", nil)
	var (
		mu    sync.Mutex
		asked []string
		sent  sync.Map
	)
	r, _ := e.relay(&pgoutbox.RelayOptions{SenderHooks: func(dest string) []sender.Hook {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, dest)
		return []sender.Hook{destHook{dest: dest, n: &sent}}
	}})
	e.add("a", msg("a1", "x"), msg("a2", "x"))
	e.add("b", msg("b1", "x"))
	e.drained(r)
	count := func(dest string) int64 {
		v, ok := sent.Load(dest)
		if !ok {
			return 0
		}
		return v.(*atomic.Int64).Load()
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"a", "b"}) || count("a") != 2 || count("b") != 1 {
		t.Fatalf("asked %v; sends seen: a %d, b %d", asked, count("a"), count("b"))
	}
}

// TestRelayDoesNotWaitForLinger: a claim's rows go as soon as they are handed to the
// sender, whatever its Linger (an hour here): the relay seals the open batches after
// each claim, since no more rows come until the next one.
func TestRelayDoesNotWaitForLinger(t *testing.T) {
	e := newEnv(t)
	q := e.queue("q", nil)
	s := "S"
	r, _ := e.relay(&pgoutbox.RelayOptions{Sender: &sender.Options{Linger: time.Hour}})
	e.add("q", msg("single", "x"))
	e.add("q", &azservicebus.Message{MessageID: ptr("session"), SessionID: &s}, msg("tx-0", "x"), msg("tx-1", "x"))
	e.drained(r)
	if got := q.Counts().Active; got != 4 {
		t.Fatalf("broker holds %d messages, want 4", got)
	}
}
