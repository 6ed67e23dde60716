package pgoutbox_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// benchLatency is the root benchmarks' broker: 7 ms away, 1 ms to store a request.
// SBKIT_BENCH_RTT (a duration) sets another round trip: at 50 ms the relay's rate is
// bounded by the senders' windows long before its CPU, even on a busy machine.
var benchLatency = sbtest.Latency{RoundTrip: benchRTT(7 * time.Millisecond), StoreTime: time.Millisecond}

// benchRTT returns SBKIT_BENCH_RTT's duration when it is set, else def.
func benchRTT(def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv("SBKIT_BENCH_RTT")); err == nil && d > 0 {
		return d
	}
	return def
}

// benchBody is the 1 KiB payload of every benchmark message.
var benchBody = make([]byte, 1024)

// benchBurst is how many messages one iteration of the throughput benchmarks sends.
const benchBurst = 10000

// benchClaim and benchPace feed sender-paced: DefaultClaimBatch messages at a time, 4 ms
// apart (the relay's claims of 500 rows took 3 to 5 ms here).
const (
	benchClaim = pgoutbox.DefaultClaimBatch
	benchPace  = 4 * time.Millisecond
)

// benchCPU turns on the CPU metrics of the relay benchmarks (SBKIT_BENCH_CPU=1).
var benchCPU = os.Getenv("SBKIT_BENCH_CPU") == "1"

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

// markCounter is a relay hook that signals reached when the rows of the last expect
// were marked sent (deleted).
type markCounter struct {
	n       atomic.Int64
	target  atomic.Int64
	reached chan struct{}
}

func (c *markCounter) OnRelayResult(_ context.Context, e pgoutbox.RelayResult) {
	if e.Outcome == pgoutbox.OutcomeSent && c.n.Add(1) == c.target.Load() {
		c.reached <- struct{}{}
	}
}

// expect makes the counter signal reached when n more rows were marked sent.
func (c *markCounter) expect(n int64) {
	c.target.Store(c.n.Load() + n)
}

// counter is a sender hook that counts accepted messages and, when times is set,
// records when each was accepted (the throughput benchmarks only count, as the
// sender's own benchmarks have no hook).
type counter struct {
	n       atomic.Int64
	target  atomic.Int64
	reached chan struct{}

	times    bool
	mu       sync.Mutex
	accepted map[string]time.Time
}

func newCounter(times bool) *counter {
	return &counter{reached: make(chan struct{}, 1), times: times, accepted: make(map[string]time.Time)}
}

func (c *counter) OnSendResult(_ context.Context, e sender.SendResult) {
	if e.Err != nil {
		return
	}
	if c.times {
		now := time.Now()
		c.mu.Lock()
		c.accepted[e.MessageID] = now
		c.mu.Unlock()
	}
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
	key     string // the relay's order_key of message g of iteration $1, in SQL (a transaction's is its own)
	session func(g int) *string
	tx      int // messages per transaction the relay sends in order (its sender OrderKey); 0: none
}{
	{"single", `'t:' || $1 || g`, func(int) *string { return nil }, 0},
	{"sessions", `'s:s' || g % 20`, func(g int) *string { return ptr("s" + strconv.Itoa(g%20)) }, 0},
	{"tx100", `'t:' || $1 || g / 100`, func(int) *string { return nil }, 100},
}

// BenchmarkRelay compares, on the same latency model (benchLatency, 1 KiB messages):
//   - sequential: one SendMessage at a time, the baseline;
//   - sender/<shape>: a pipelined, batching (and, with sessions, ordered) sender.Sender
//     given benchBurst messages at once (SendAll);
//   - sender-paced/<shape>: the same sender given the same messages benchClaim at a
//     time, benchPace apart (faster than it sends them), as a relay's claims give them;
//   - relay/<shape>: a running relay, against the PostgreSQL at SBKIT_PG_DSN, draining a
//     backlog of benchBurst rows committed at once (inserted by one statement, as Add
//     would have inserted them, to keep the setup short; NOTIFY wakes the relay): from
//     the commit to the last acceptance (msgs/s, as the sender's), and to the last row
//     deleted (drained-msgs/s);
//   - relay-latency/<wake>: one row per transaction, committed while the relay idles: the
//     time from Commit's return to the broker's acceptance, p50 and p99, beside the
//     broker's round trip, for each way the relay learns of the commit (latencyWakes).
//
// The sender and the relay use the sender's default options (a window of 1,024
// messages). Every throughput benchmark reports the broker's requests per burst
// (batches/burst); with SBKIT_BENCH_CPU=1 the relay's also report the CPU time of this
// process and of the local postgres processes per burst (Linux).
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
		reportRate(b, topic, sbtest.EntityStats{}, int64(b.N))
	})
	for _, shape := range benchShapes {
		for _, paced := range []bool{false, true} {
			name := "sender/"
			if paced {
				name = "sender-paced/"
			}
			b.Run(name+shape.name, func(b *testing.B) {
				ns, topic := benchTopic(b)
				dst, err := ns.NewSender("bench", nil)
				if err != nil {
					b.Fatal(err)
				}
				// The relay's sender options and the relay's messages: MessageIDs set, and
				// a transaction's messages in order (their OrderKey).
				keys := make(map[*azservicebus.Message]string, benchBurst)
				s, err := sender.New(dst, &sender.Options{Ordered: true, AttemptTimeout: pgoutbox.DefaultLease / 4,
					Hooks: []sender.Hook{newCounter(false)}, OrderKey: func(m *azservicebus.Message) string { return keys[m] }})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close(ctx)
				msgs := make([]*azservicebus.Message, benchBurst)
				burst := func(i int) {
					clear(keys)
					for g := range msgs {
						id := strconv.Itoa(i) + "-" + strconv.Itoa(g)
						msgs[g] = &azservicebus.Message{Body: benchBody, MessageID: &id, SessionID: shape.session(g)}
						if shape.tx > 0 {
							keys[msgs[g]] = "t:" + strconv.Itoa(i) + "-" + strconv.Itoa(g/shape.tx)
						}
					}
					send := s.SendAll
					if paced {
						send = func(ctx context.Context, msgs []*azservicebus.Message) error { return sendPaced(ctx, s, msgs) }
					}
					if err := send(ctx, msgs); err != nil {
						b.Fatal(err)
					}
				}
				burst(-1) // untimed, as the relay's
				base := topic.Stats()
				for i := 0; b.Loop(); i++ {
					burst(i)
				}
				reportRate(b, topic, base, int64(b.N)*benchBurst)
			})
		}
		b.Run("relay/"+shape.name, func(b *testing.B) {
			e, topic := benchStore(b)
			marked := &markCounter{reached: make(chan struct{}, 1)}
			r, c := benchRelay(b, e, &pgoutbox.RelayOptions{PollInterval: time.Hour, Hooks: []pgoutbox.Hook{marked}}, false)
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			b.Cleanup(func() {
				_ = r.Close(ctx)
				<-done
			})
			e.listening()
			insert := `INSERT INTO ` + e.ob.Table() + ` (destination, order_key, message_id, body, session_id)
SELECT 'bench', ` + shape.key + `, $1 || g, $2, CASE WHEN $3 THEN 's' || g % 20 END FROM generate_series(0, $4 - 1) g`
			var drained, cpuSelf, cpuPG time.Duration
			// burst commits benchBurst rows and waits until the relay deleted them; timed,
			// from the commit's return to the last acceptance.
			burst := func(i int, timed bool) {
				tx, err := e.pool.Begin(ctx)
				if err == nil {
					_, err = tx.Exec(ctx, insert, strconv.Itoa(i)+"-", benchBody, shape.session(0) != nil, benchBurst)
				}
				if err == nil {
					_, err = tx.Exec(ctx, `SELECT pg_notify($1, '')`, e.ob.Channel())
				}
				if err != nil {
					b.Fatal(err)
				}
				c.expect(benchBurst)
				marked.expect(benchBurst)
				// Timed from the commit's return, when the rows are visible (NOTIFY reaches
				// the relay at the commit, so its claim may begin a moment earlier).
				if err := tx.Commit(ctx); err != nil {
					b.Fatal(err)
				}
				if timed {
					b.StartTimer()
				}
				start := time.Now()
				self0, pg0 := cpuNow()
				<-c.reached
				if timed {
					b.StopTimer()
				}
				<-marked.reached
				if timed {
					drained += time.Since(start)
					self1, pg1 := cpuNow()
					cpuSelf, cpuPG = cpuSelf+self1-self0, cpuPG+pg1-pg0
				}
			}
			// An untimed burst first: the relay dials its connections and prepares its
			// statements once in its life, and the sender's benchmarks warm up alike.
			burst(-1, false)
			base := topic.Stats()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				burst(i, true)
				b.StartTimer()
			}
			reportRate(b, topic, base, int64(b.N)*benchBurst)
			b.ReportMetric(float64(b.N)*benchBurst/drained.Seconds(), "drained-msgs/s")
			if benchCPU {
				b.ReportMetric(float64(cpuSelf.Milliseconds())/float64(b.N), "go-cpu-ms/burst")
				b.ReportMetric(float64(cpuPG.Milliseconds())/float64(b.N), "pg-cpu-ms/burst")
			}
			if st := r.Stats(); st.Sent != int64(b.N+1)*benchBurst || st.Claimed != st.Sent {
				b.Fatalf("relay %+v, want %d sent at once", st, (b.N+1)*benchBurst)
			}
		})
	}
	for _, wake := range latencyWakes {
		b.Run("relay-latency/"+wake.name, func(b *testing.B) { benchLatencyWake(b, wake.notify, wake.after, wake.poll) })
	}
}

// latencyWakes are the ways a relay learns of a commit, as relay-latency measures them:
// Add's NOTIFY in the transaction (the default), Outbox.Notify after the commit (with
// Options.DisableNotify), and polling only (DisableNotify, no LISTEN), here every
// 100 ms (the default PollInterval is 1 s).
var latencyWakes = []struct {
	name          string
	notify, after bool
	poll          time.Duration
}{
	{"notify", true, false, time.Hour},
	{"notify-after", false, true, time.Hour},
	{"poll-100ms", false, false, 100 * time.Millisecond},
}

// benchLatencyWake measures, one row per transaction committed while the relay idles,
// the time from Commit's return to the broker's acceptance: p50 and p99, in ms and in
// broker round trips (rtt-ms, benchLatency's round trip and store time). With notify,
// Add notifies in the transaction; with after, Outbox.Notify is called after the commit
// (its time counts); otherwise the relay polls every poll, and each commit waits a random
// part of poll first, so that commits fall anywhere between two polls.
func benchLatencyWake(b *testing.B, notify, after bool, poll time.Duration) {
	ctx := context.Background()
	e, topic := benchStore(b)
	ob := e.ob
	if !notify {
		var err error
		ob, err = pgoutbox.New(e.pool, &pgoutbox.Options{Schema: e.schema, DisableNotify: true})
		if err != nil {
			b.Fatal(err)
		}
	}
	listen := notify || after
	r, c := benchRelay(b, e, &pgoutbox.RelayOptions{PollInterval: poll, DisableListen: !listen}, true)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	b.Cleanup(func() {
		_ = r.Close(ctx)
		<-done
	})
	if listen {
		e.listening()
	}
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		if !listen {
			b.StopTimer()
			time.Sleep(time.Duration(rand.Int64N(int64(poll))))
			b.StartTimer()
		}
		id := "l" + strconv.Itoa(i)
		c.expect(1)
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			return ob.Add(ctx, tx, "bench", &azservicebus.Message{Body: benchBody, MessageID: &id})
		})
		committed := time.Now()
		if err == nil && after {
			err = ob.Notify(ctx)
		}
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
	rtt := benchLatency.RoundTrip + benchLatency.StoreTime
	p50, p99 := lat[len(lat)/2], lat[(len(lat)-1)*99/100]
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(float64(p50)/float64(rtt), "p50-rtts")
	b.ReportMetric(ms(rtt), "rtt-ms")
	if sent := topic.Stats().Sent; sent != int64(b.N) {
		b.Fatalf("broker stored %d of %d", sent, b.N)
	}
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
// messages it sent (and of when, with times).
func benchRelay(b *testing.B, e *env, opts *pgoutbox.RelayOptions, times bool) (*pgoutbox.Relay, *counter) {
	b.Helper()
	c := newCounter(times)
	o := *opts
	o.Sender = &sender.Options{Hooks: []sender.Hook{c}}
	r, err := pgoutbox.NewRelay(e.ob, e.destinations, &o)
	if err != nil {
		b.Fatal(err)
	}
	return r, c
}

// reportRate reports the messages per second of the timed part and fails the benchmark
// unless the broker stored n messages since base, its stats before the timed part.
func reportRate(b *testing.B, topic *sbtest.Topic, base sbtest.EntityStats, n int64) {
	b.Helper()
	st := topic.Stats()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	if batches := st.Batches - base.Batches; batches > 0 {
		b.ReportMetric(float64(batches)/float64(n)*benchBurst, "batches/burst")
	}
	if sent := st.Sent - base.Sent; sent != n {
		b.Fatalf("broker stored %d of %d messages", sent, n)
	}
}

// sendPaced gives msgs to s benchClaim at a time, benchPace apart, from a goroutine of
// its own (as a relay's claims do), and waits for every outcome.
func sendPaced(ctx context.Context, s *sender.Sender, msgs []*azservicebus.Message) error {
	chunks := make(chan []*azservicebus.Message, len(msgs)/benchClaim+1)
	go func() {
		defer close(chunks)
		t := time.NewTicker(benchPace)
		defer t.Stop()
		for i := 0; i < len(msgs); i += benchClaim {
			if i > 0 {
				<-t.C
			}
			chunks <- msgs[i:min(i+benchClaim, len(msgs))]
		}
	}()
	var results []*sender.Result
	for chunk := range chunks {
		for _, m := range chunk {
			r, err := s.SendAsync(ctx, m)
			if err != nil {
				return err
			}
			results = append(results, r)
		}
	}
	for _, r := range results {
		if err := r.Wait(ctx); err != nil {
			return err
		}
	}
	return nil
}

// cpuNow returns the CPU time of this process and the summed CPU time of the postgres
// processes alive now (read from /proc; zero elsewhere, or without SBKIT_BENCH_CPU).
func cpuNow() (self, pg time.Duration) {
	if !benchCPU {
		return 0, 0
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(d + "/comm")
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		stat, err := os.ReadFile(d + "/stat")
		if err != nil {
			continue
		}
		// After the command's closing parenthesis: state is field 3, utime 14, stime 15.
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		pg += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return self, pg
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100
