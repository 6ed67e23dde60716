package pgoutbox_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// benchLatency is the root benchmarks' broker: 7 ms away, 1 ms to store a request.
var benchLatency = sbtest.Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}

// benchBody is the 1 KiB payload of every benchmark message.
var benchBody = make([]byte, 1024)

// benchBurst is how many messages one iteration of the throughput benchmarks sends.
const benchBurst = 10000

// benchTopic returns a namespace with benchLatency and a topic "bench" without
// subscriptions (the broker models every request and keeps nothing).
func benchTopic(b *testing.B) (*sbtest.Namespace, *sbtest.Topic) {
	b.Helper()
	ns := sbtest.NewNamespace(&sbtest.NamespaceOptions{Latency: benchLatency})
	topic, err := ns.NewTopic("bench", nil)
	if err != nil {
		b.Fatal(err)
	}
	return ns, topic
}

// counter is a sender hook that counts accepted messages and records when each was
// accepted.
type counter struct {
	n       atomic.Int64
	target  atomic.Int64
	reached chan struct{}

	mu       sync.Mutex
	accepted map[string]time.Time
}

func newCounter() *counter {
	return &counter{reached: make(chan struct{}, 1), accepted: make(map[string]time.Time)}
}

func (c *counter) OnSendResult(_ context.Context, e sender.SendResult) {
	if e.Err != nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	c.accepted[e.MessageID] = now
	c.mu.Unlock()
	if c.n.Add(1) == c.target.Load() {
		c.reached <- struct{}{}
	}
}

// expect makes the counter signal reached when n more messages were accepted.
func (c *counter) expect(n int64) { c.target.Store(c.n.Load() + n) }

// benchShapes are the backlogs the throughput benchmarks send: messages of their own
// (one per transaction, in the relay), in 20 sessions, or in transactions of 100
// messages without a session (which the relay sends one after the other).
var benchShapes = []struct {
	name    string
	key     string // the relay's order_key of message g, in SQL
	session func(g int) *string
}{
	{"single", `'t:' || g`, func(int) *string { return nil }},
	{"sessions", `'s:s' || g % 20`, func(g int) *string { return ptr("s" + strconv.Itoa(g%20)) }},
	{"tx100", `'t:' || g / 100`, func(int) *string { return nil }},
}

// BenchmarkRelay compares, on the same latency model (benchLatency, 1 KiB messages):
//   - sequential: one SendMessage at a time, the baseline;
//   - sender/<shape>: a pipelined, batching (and, with sessions, ordered) sender.Sender
//     sending benchBurst messages at once;
//   - relay/<shape>: a relay draining a backlog of benchBurst rows, from Run to the last
//     acceptance, against the PostgreSQL at SBKIT_PG_DSN (the rows are inserted by one
//     statement, as Add would have inserted them, to keep the setup short);
//   - relay-latency: one row per transaction, committed while the relay idles (polling an
//     hour apart, so NOTIFY wakes it): the time from Commit's return to the broker's
//     acceptance, p50 and p99, beside the broker's round trip.
func BenchmarkRelay(b *testing.B) {
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		ns, topic := benchTopic(b)
		dst, err := ns.NewSender("bench", nil)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if err := dst.SendMessage(ctx, &azservicebus.Message{Body: benchBody}, nil); err != nil {
				b.Fatal(err)
			}
		}
		reportRate(b, topic, int64(b.N))
	})
	for _, shape := range benchShapes {
		b.Run("sender/"+shape.name, func(b *testing.B) {
			ns, topic := benchTopic(b)
			dst, err := ns.NewSender("bench", nil)
			if err != nil {
				b.Fatal(err)
			}
			s, err := sender.New(dst, &sender.Options{Ordered: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			msgs := make([]*azservicebus.Message, benchBurst)
			for b.Loop() {
				for g := range msgs {
					msgs[g] = &azservicebus.Message{Body: benchBody, SessionID: shape.session(g)}
				}
				if err := s.SendAll(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, topic, int64(b.N)*benchBurst)
		})
		b.Run("relay/"+shape.name, func(b *testing.B) {
			e, topic := benchStore(b)
			var failed results
			insert := `INSERT INTO ` + e.ob.Table() + ` (destination, order_key, message_id, body, session_id)
SELECT 'bench', ` + shape.key + `, $1 || g, $2, CASE WHEN $3 THEN 's' || g % 20 END FROM generate_series(0, $4 - 1) g`
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				if _, err := e.pool.Exec(ctx, insert, strconv.Itoa(i)+"-", benchBody, shape.session(0) != nil, benchBurst); err != nil {
					b.Fatal(err)
				}
				r, c := benchRelay(b, e, &pgoutbox.RelayOptions{DisableListen: true, Hooks: []pgoutbox.Hook{&failed}})
				c.expect(benchBurst)
				b.StartTimer()
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx) }()
				<-c.reached
				b.StopTimer()
				if err := r.Close(ctx); err != nil {
					b.Fatal(err)
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				e.drained(r)
				if st := r.Stats(); st.Sent != benchBurst {
					b.Fatalf("relay %+v, want %d sent at once", st, benchBurst)
				}
				b.StartTimer()
			}
			reportRate(b, topic, int64(b.N)*benchBurst)
		})
	}
	b.Run("relay-latency", func(b *testing.B) {
		e, topic := benchStore(b)
		r, c := benchRelay(b, e, &pgoutbox.RelayOptions{PollInterval: time.Hour})
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		b.Cleanup(func() {
			_ = r.Close(ctx)
			<-done
		})
		e.listening()
		var lat []time.Duration
		for i := 0; b.Loop(); i++ {
			id := "l" + strconv.Itoa(i)
			c.expect(1)
			var committed time.Time
			err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
				return e.ob.Add(ctx, tx, "bench", &azservicebus.Message{Body: benchBody, MessageID: &id})
			})
			committed = time.Now()
			if err != nil {
				b.Fatal(err)
			}
			<-c.reached
			c.mu.Lock()
			lat = append(lat, c.accepted[id].Sub(committed))
			c.mu.Unlock()
		}
		slices.Sort(lat)
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
		b.ReportMetric(ms(lat[(len(lat)-1)*99/100]), "p99-ms")
		b.ReportMetric(ms(benchLatency.RoundTrip+benchLatency.StoreTime), "rtt-ms")
		if sent := topic.Stats().Sent; sent != int64(b.N) {
			b.Fatalf("broker stored %d of %d", sent, b.N)
		}
	})
}

// benchStore returns an outbox whose destination "bench" is benchTopic's topic.
func benchStore(b *testing.B) (*env, *sbtest.Topic) {
	b.Helper()
	e := newEnv(b)
	ns, topic := benchTopic(b)
	e.ns = ns
	return e, topic
}

// benchRelay returns a relay (not running) over e with opts and a counter of the
// messages it sent.
func benchRelay(b *testing.B, e *env, opts *pgoutbox.RelayOptions) (*pgoutbox.Relay, *counter) {
	b.Helper()
	c := newCounter()
	o := *opts
	o.Sender = &sender.Options{Hooks: []sender.Hook{c}}
	r, err := pgoutbox.NewRelay(e.ob, e.destinations, &o)
	if err != nil {
		b.Fatal(err)
	}
	return r, c
}

// reportRate reports the messages per second of the timed part and fails the benchmark
// unless the broker stored n messages.
func reportRate(b *testing.B, topic *sbtest.Topic, n int64) {
	b.Helper()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	if sent := topic.Stats().Sent; sent != n {
		b.Fatalf("broker stored %d of %d messages", sent, n)
	}
}
