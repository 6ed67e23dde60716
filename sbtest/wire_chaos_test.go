package sbtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	goamqp "github.com/Azure/go-amqp"
)

// TestServerChaos drives the server with seeded go-amqp clients that pipeline sends
// (settled and pre-settled) to a queue and a session queue, receive and settle in every
// mode with every outcome, and detach or drop their connection at random moments, while
// chaosSideline adds an SDK client, unread $management answers on several sessions of
// one connection, connections dropped mid-frame and a queue deleted and created again
// under load. Then it checks what the server promises whatever the client does:
//
//   - every message the server accepted (an unsettled send it accepted, or a pre-settled
//     one before a detach it answered) was delivered or is still queued, and none is
//     stored twice;
//   - the messages of one link are stored in the order they were sent;
//   - a settlement the server confirmed, or one sent before a detach it answered, took
//     effect: completed messages are gone, dead-lettered ones in the dead-letter queue,
//     deferred ones deferred;
//   - once the locks have expired nothing is locked, and no session is held;
//   - the SDK client receives what it sent, and the heap grew by less than 64 MiB;
//   - no goroutine is left once the clients are gone and the server is closed.
//
// The clients' choices follow the seed (SBTEST_CHAOS_SEED picks one); the interleaving
// with the server does not. Not parallel: it counts the process's goroutines.
func TestServerChaos(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv("SBTEST_CHAOS_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SBTEST_CHAOS_SEED: %v", err)
		}
		seeds = []uint64{seed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runChaos(t, seed) })
	}
}

const (
	chaosClients      = 6
	chaosRounds       = 8
	chaosLockDuration = 500 * time.Millisecond
)

func runChaos(t *testing.T, seed uint64) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(&ServerOptions{
		Queues: map[string]*EntityOptions{
			"q":  {LockDuration: chaosLockDuration},
			"sq": {LockDuration: chaosLockDuration, RequiresSession: true},
		},
		NamespaceOptions: &NamespaceOptions{Latency: Latency{RoundTrip: time.Millisecond}},
		Logger:           chaosLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close(context.Background()) }()
	ledger := newChaosLedger()
	heapBefore := heapInUse()
	sideCtx, stopSide := context.WithCancel(context.Background())
	sideDone := chaosSideline(sideCtx, t, srv)
	var wg sync.WaitGroup
	for i := range chaosClients {
		c := &chaosClient{t: t, id: i, addr: srv.Addr().String(), ledger: ledger,
			rng: rand.New(rand.NewPCG(seed, uint64(i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run()
		}()
	}
	wg.Wait()
	stopSide()
	<-sideDone
	if t.Failed() {
		t.Fatalf("seed %d: a client failed", seed)
	}

	connsGone(t, srv) // the server has handled every frame and every drop
	ns := srv.Namespace()
	q, _ := ns.Entity("q")
	sq, _ := ns.Entity("sq")
	// Wait out every lock the clients left behind, then nothing may be locked.
	var until time.Time
	for _, e := range []*Entity{q, sq} {
		for _, m := range e.Locked() {
			if m.LockedUntil != nil && m.LockedUntil.After(until) {
				until = *m.LockedUntil
			}
		}
	}
	time.Sleep(time.Until(until) + 10*time.Millisecond)
	for _, e := range []*Entity{q, sq} {
		if n := e.Counts().Locked; n != 0 {
			t.Errorf("seed %d: %s: %d messages still locked after their locks expired", seed, e.Name(), n)
		}
	}
	for _, s := range sq.Sessions() {
		if s.Locked {
			t.Errorf("seed %d: session %s still held after every client went away", seed, s.ID)
		}
	}
	ledger.check(t, seed, q, sq)
	if grown := int64(heapInUse()) - int64(heapBefore); grown > 64<<20 {
		t.Errorf("seed %d: the heap grew by %d MiB over the run", seed, grown>>20)
	}

	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	noGoroutinesAbove(t, base)
}

// chaosSideline runs, beside the chaos clients and until ctx ends, what they do not do:
// an SDK client sending and receiving on its own queue (every message comes back), a
// client that asks $management for peeks on several sessions of one connection and
// never reads the answers, connections dropped in the middle of a frame, and a queue
// deleted and created again while a client sends to it. The returned channel closes when
// all of it stopped.
func chaosSideline(ctx context.Context, t *testing.T, srv *Server) <-chan struct{} {
	ns := srv.Namespace()
	if _, err := ns.NewQueue("sdk", nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				f()
			}
		}()
	}
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sdkSender, _ := client.NewSender("sdk", nil)
	sdkReceiver, _ := client.NewReceiverForQueue("sdk", nil)
	n := 0
	run(func() { // the SDK client: what it sends, it receives
		n++
		body := fmt.Sprint("sdk-", n)
		if err := sdkSender.SendMessage(ctx, &azservicebus.Message{Body: []byte(body)}, nil); err != nil {
			if ctx.Err() == nil {
				t.Errorf("SDK client beside the chaos: send: %v", err)
			}
			return
		}
		ms, err := sdkReceiver.ReceiveMessages(ctx, 1, nil)
		if err != nil || len(ms) != 1 {
			if ctx.Err() == nil {
				t.Errorf("SDK client beside the chaos: receive: %d, %v", len(ms), err)
			}
			return
		}
		if string(ms[0].Body) != body {
			t.Errorf("SDK client beside the chaos: received %q, want %q", ms[0].Body, body)
		}
		_ = sdkReceiver.CompleteMessage(ctx, ms[0], nil)
	})
	run(func() { // peeks whose answers are never read, on three sessions of one connection
		cctx, cancel := context.WithTimeout(ctx, wireTimeout)
		defer cancel()
		conn, err := goamqp.Dial(cctx, "amqp://"+srv.Addr().String(), &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
		if err != nil {
			return
		}
		defer conn.Close()
		for i := range 3 {
			sess, err := conn.NewSession(cctx, nil)
			if err != nil {
				return
			}
			replyTo := fmt.Sprint("unread-", i)
			if _, err := sess.NewReceiver(cctx, "q/$management", &goamqp.ReceiverOptions{Credit: -1, TargetAddress: replyTo}); err != nil {
				return
			}
			snd, err := sess.NewSender(cctx, "q/$management", nil)
			if err != nil {
				return
			}
			for j := range 4 {
				_ = snd.Send(cctx, &goamqp.Message{
					Properties:            &goamqp.MessageProperties{MessageID: uint64(j), ReplyTo: &replyTo},
					ApplicationProperties: map[string]any{"operation": opPeek},
					Value:                 map[string]any{"from-sequence-number": int64(1), "message-count": int32(1000)},
				}, nil)
			}
		}
	})
	run(func() { // a connection dropped in the middle of a frame
		nc, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			return
		}
		defer nc.Close()
		frame := []byte{0, 0, 1, 0, 2, 0, 0, 0, 0, 0x53, 0x10} // a 256-byte frame, cut short
		_, _ = nc.Write(append([]byte("AMQP\x00\x01\x00\x00"), frame...))
		// The drop is the end of the stream mid-frame; waiting for the server to close its
		// side keeps this one connection at a time, a fault rather than a flood of
		// handshakes that would evict the clients' own (MaxHandshakes).
		_ = nc.(*net.TCPConn).CloseWrite()
		_ = nc.SetReadDeadline(time.Now().Add(wireTimeout))
		_, _ = io.Copy(io.Discard, nc)
	})
	run(func() { // a queue deleted and created again while a client sends to it
		if _, err := ns.NewQueue("churn", nil); err != nil {
			return
		}
		s, err := client.NewSender("churn", nil)
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			_ = s.SendMessage(sctx, &azservicebus.Message{Body: []byte("c")}, nil)
			cancel()
			_ = s.Close(ctx)
		}
		_ = ns.DeleteQueue("churn")
	})
	done := make(chan struct{})
	go func() {
		wg.Wait()
		cctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
		defer cancel()
		_ = client.Close(cctx)
		close(done)
	}()
	return done
}

// chaosLedger is what the clients know: what they sent and settled and what they were
// told. Safe for concurrent use.
type chaosLedger struct {
	mu        sync.Mutex
	links     map[string][]string // sending link -> the bodies it sent, in order
	mustExist map[string]bool     // bodies the server accepted
	delivered map[string]int      // body -> deliveries
	seq       map[string]int64    // body -> the sequence number it was delivered with
	effect    map[string]string   // body -> a settlement known to have taken effect
}

func newChaosLedger() *chaosLedger {
	return &chaosLedger{links: map[string][]string{}, mustExist: map[string]bool{},
		delivered: map[string]int{}, seq: map[string]int64{}, effect: map[string]string{}}
}

func (l *chaosLedger) sent(link string, bodies []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.links[link] = append(l.links[link], bodies...)
}

func (l *chaosLedger) accepted(bodies ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		l.mustExist[b] = true
	}
}

func (l *chaosLedger) received(body string, seq int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.delivered[body]++
	if old, ok := l.seq[body]; ok && old != seq {
		return fmt.Errorf("%s delivered with sequence numbers %d and %d: stored twice", body, old, seq)
	}
	l.seq[body] = seq
	return nil
}

func (l *chaosLedger) tookEffect(outcomes map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for b, o := range outcomes {
		l.effect[b] = o
	}
}

// check compares the ledger with what the broker holds at the end.
func (l *chaosLedger) check(t *testing.T, seed uint64, entities ...*Entity) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	where := map[string]string{} // body -> "active", "deferred" or "deadletter"
	note := func(state string, ms []*azservicebus.ReceivedMessage) {
		for _, m := range ms {
			b := string(m.Body)
			if w, ok := where[b]; ok {
				t.Errorf("seed %d: %s is stored twice (%s and %s)", seed, b, w, state)
			}
			where[b] = state
			if old, ok := l.seq[b]; ok && m.SequenceNumber != nil && old != *m.SequenceNumber {
				t.Errorf("seed %d: %s delivered as %d, stored as %d", seed, b, old, *m.SequenceNumber)
			}
			if m.SequenceNumber != nil {
				l.seq[b] = *m.SequenceNumber
			}
		}
	}
	for _, e := range entities {
		note("active", e.Active())
		note("deferred", e.Deferred())
		note("deadletter", e.DeadLetters())
	}
	for b := range l.mustExist {
		if where[b] == "" && l.delivered[b] == 0 {
			t.Errorf("seed %d: %s was accepted, then neither delivered nor kept", seed, b)
		}
	}
	for b, o := range l.effect {
		switch w := where[b]; o {
		case "complete":
			if w != "" {
				t.Errorf("seed %d: %s was completed and is %s again", seed, b, w)
			}
		case "deadletter", "deferred":
			if w != o {
				t.Errorf("seed %d: %s was settled %s and is %q", seed, b, o, w)
			}
		}
	}
	for link, bodies := range l.links {
		last := int64(-1)
		for _, b := range bodies {
			s, ok := l.seq[b]
			if !ok {
				continue
			}
			if s <= last {
				t.Errorf("seed %d: link %s: %s stored as %d, after %d: out of order (%v)", seed, link, b, s, last, bodies)
				break
			}
			last = s
		}
	}
	t.Logf("seed %d: %d links, %d messages accepted, %d delivered, %d settlements known", seed,
		len(l.links), len(l.mustExist), len(l.delivered), len(l.effect))
}

// chaosClient is one seeded client. Its connection may be dropped and made again.
type chaosClient struct {
	t      *testing.T
	id     int
	addr   string
	ledger *chaosLedger
	rng    *rand.Rand
	links  int

	nc   net.Conn
	conn *goamqp.Conn
	sess *goamqp.Session
}

// How a round ends.
const (
	endDetach = iota // the link detaches and waits for the server's answer
	endDrop          // the TCP connection drops under the link
	endClose         // the connection closes (close frame) under the link
	endKeep          // the link stays until the connection ends
	numEnds
)

func (c *chaosClient) run() {
	for range chaosRounds {
		if c.conn == nil && !c.connect() {
			return
		}
		if c.rng.IntN(2) == 0 {
			c.sendRound()
		} else {
			c.receiveRound()
		}
	}
	if c.conn != nil {
		c.end([]int{endClose, endDrop}[c.rng.IntN(2)])
	}
}

func (c *chaosClient) connect() bool {
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	nc, err := net.Dial("tcp", c.addr)
	if err != nil {
		c.t.Errorf("client %d: dial: %v", c.id, err)
		return false
	}
	conn, err := goamqp.NewConn(ctx, nc, &goamqp.ConnOptions{SASLType: goamqp.SASLTypeAnonymous()})
	if err != nil {
		_ = nc.Close()
		c.t.Errorf("client %d: connect: %v", c.id, err)
		return false
	}
	sess, err := conn.NewSession(ctx, nil)
	if err != nil {
		_ = conn.Close()
		c.t.Errorf("client %d: session: %v", c.id, err)
		return false
	}
	c.nc, c.conn, c.sess = nc, conn, sess
	return true
}

// end ends the connection with a drop or a close; other ends leave it.
func (c *chaosClient) end(how int) {
	switch how {
	case endDrop:
		_ = c.nc.Close()
	case endClose:
	default:
		return
	}
	_ = c.conn.Close() // after a drop: waits for go-amqp's goroutines
	c.nc, c.conn, c.sess = nil, nil, nil
}

func (c *chaosClient) queue() (name string, session bool) {
	if c.rng.IntN(2) == 0 {
		return "q", false
	}
	return "sq", true
}

func (c *chaosClient) sessionID() string { return "s" + strconv.Itoa(c.id) }

// sendRound pipelines 1 to 15 sends on a new link, pre-settled or not, then ends the
// link at random.
func (c *chaosClient) sendRound() {
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	queue, session := c.queue()
	settled := c.rng.IntN(2) == 0
	snd, err := c.sess.NewSender(ctx, queue, &goamqp.SenderOptions{SettlementMode: senderMode(settled)})
	if err != nil {
		c.t.Errorf("client %d: attach sender: %v", c.id, err)
		return
	}
	link := fmt.Sprintf("c%d.l%d", c.id, c.links)
	c.links++
	var bodies []string
	var receipts []goamqp.SendReceipt
	for j := range 1 + c.rng.IntN(15) {
		body := fmt.Sprintf("%s.%02d", link, j)
		m := goamqp.NewMessage([]byte(body))
		if session {
			m.Properties = &goamqp.MessageProperties{GroupID: ptr(c.sessionID())}
		}
		if settled {
			err = snd.Send(ctx, m, nil)
		} else {
			var rc goamqp.SendReceipt
			rc, err = snd.SendWithReceipt(ctx, m, nil)
			receipts = append(receipts, rc)
		}
		if err != nil {
			c.t.Errorf("client %d: send: %v", c.id, err)
			return
		}
		bodies = append(bodies, body)
	}
	c.ledger.sent(link, bodies)
	waitReceipts := func() {
		for i, rc := range receipts {
			st, err := rc.Wait(ctx)
			if _, ok := st.(*goamqp.StateAccepted); ok && err == nil {
				c.ledger.accepted(bodies[i])
			}
		}
	}
	how := c.rng.IntN(numEnds)
	if how == endKeep || c.rng.IntN(2) == 0 {
		waitReceipts()
	}
	switch how {
	case endDetach:
		err := snd.Close(ctx)
		if err == nil && settled { // the server answered the detach: it stored what came before
			c.ledger.accepted(bodies...)
		} else if err != nil {
			c.t.Logf("client %d: detach sender: %v", c.id, err)
		}
	default:
		c.end(how)
	}
	waitReceipts() // outcomes that arrived before the link went away
}

// receiveRound receives up to 8 messages on a new link, peek-lock, settling each at
// once with a random outcome, pre-settled (receive settle mode first) or confirmed by
// the server (mode second), then ends the link at random.
func (c *chaosClient) receiveRound() {
	ctx, cancel := context.WithTimeout(context.Background(), wireTimeout)
	defer cancel()
	queue, session := c.queue()
	first := c.rng.IntN(2) == 0
	mode := goamqp.ReceiverSettleModeSecond
	if first {
		mode = goamqp.ReceiverSettleModeFirst
	}
	credit := 1 + c.rng.IntN(8)
	opts := &goamqp.ReceiverOptions{Credit: int32(credit), SettlementMode: mode.Ptr()}
	if session {
		opts.Filters = []goamqp.LinkFilter{goamqp.NewLinkFilter(string(sessionFilterName), 0x00000137000000C, c.sessionID())}
	}
	rcv, err := c.sess.NewReceiver(ctx, queue, opts)
	if err != nil {
		var ae *goamqp.Error
		if session && errors.As(err, &ae) && ae.Condition == condSessionCannotBeLocked {
			return // the session is still held by a link of a connection that is going away
		}
		c.t.Errorf("client %d: attach receiver: %v", c.id, err)
		return
	}
	pending := map[string]string{} // pre-settled settlements, known once the detach is answered
	for range credit {
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Millisecond)
		m, err := rcv.Receive(rctx, nil)
		rcancel()
		if err != nil {
			break
		}
		got := time.Now()
		body := string(m.GetData())
		if err := c.ledger.received(body, annotationSeq(m)); err != nil {
			c.t.Errorf("client %d: %v", c.id, err)
		}
		outcome, err := c.settle(ctx, rcv, m)
		if outcome == "" {
			continue
		}
		// A settlement sent well within the lock took effect once the server confirmed it
		// (mode second) or answered a later detach (mode first).
		if time.Since(got) < chaosLockDuration/2 {
			if first {
				pending[body] = outcome
			} else if err == nil {
				c.ledger.tookEffect(map[string]string{body: outcome})
			}
		}
	}
	switch how := c.rng.IntN(numEnds); how {
	case endDetach:
		// A detach the server answers without an error comes after every settlement
		// before it; one with an error (a session lock lost meanwhile, say) proves
		// nothing.
		if err := rcv.Close(ctx); err != nil {
			c.t.Logf("client %d: detach receiver: %v", c.id, err)
			return
		}
		c.ledger.tookEffect(pending)
	default:
		c.end(how)
	}
}

// settle settles m with a random outcome and returns it ("" for none: the lock is left
// to expire) with the settlement's error.
func (c *chaosClient) settle(ctx context.Context, rcv *goamqp.Receiver, m *goamqp.Message) (string, error) {
	switch c.rng.IntN(6) {
	case 0:
		return "complete", rcv.AcceptMessage(ctx, m)
	case 1:
		return "deadletter", rcv.RejectMessage(ctx, m, nil)
	case 2:
		return "deferred", rcv.ModifyMessage(ctx, m, &goamqp.ModifyMessageOptions{UndeliverableHere: true})
	case 3:
		return "abandon", rcv.ModifyMessage(ctx, m, nil)
	case 4:
		return "release", rcv.ReleaseMessage(ctx, m)
	}
	return "", nil
}

// annotationSeq returns the x-opt-sequence-number a delivery carries, or -1.
func annotationSeq(m *goamqp.Message) int64 {
	for k, v := range m.Annotations {
		if fmt.Sprint(k) == string(annSequenceNumber) {
			if n, ok := v.(int64); ok {
				return n
			}
		}
	}
	return -1
}

func chaosLogger() *slog.Logger {
	if os.Getenv("SBTEST_SERVER_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
