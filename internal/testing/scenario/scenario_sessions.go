package scenario

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/reqreply"
)

// sessionMessage is a message of a session.
func sessionMessage(session, id string) *azservicebus.Message {
	m := message(id, id)
	m.SessionID = &session
	return m
}

// acceptSession accepts a session by id (next available when id is ""), closed when t
// ends.
func acceptSession(t *testing.T, q Queue, id string) sbkit.SessionReceiver {
	t.Helper()
	ctx := testContext(t)
	var sr sbkit.SessionReceiver
	var err error
	if id == "" {
		sr, err = q.Sessions().AcceptNextSession(ctx)
	} else {
		sr, err = q.Sessions().AcceptSession(ctx, id)
	}
	if err != nil {
		t.Fatalf("accept session %q: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = sr.Close(ctx)
	})
	return sr
}

// sessionsInOrder: messages of interleaved sessions come back per session in the order
// they were sent, each session to the one receiver that accepted it.
func sessionsInOrder(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{RequiresSession: true})
	s := q.NewSender(t)
	want := map[string][]string{}
	for i := range 4 {
		for _, sess := range []string{"a", "b", "c"} {
			id := fmt.Sprintf("%s-%d", sess, i)
			sendAll(t, s, sessionMessage(sess, id))
			want[sess] = append(want[sess], id)
		}
	}
	for range 3 {
		sr := acceptSession(t, q, "")
		got := receiveN(t, sr, 4)
		for _, m := range got {
			if *m.SessionID != sr.SessionID() {
				t.Fatalf("session %s received a message of %s", sr.SessionID(), *m.SessionID)
			}
		}
		if !slices.Equal(ids(got), want[sr.SessionID()]) {
			t.Fatalf("session %s: %v, want %v", sr.SessionID(), ids(got), want[sr.SessionID()])
		}
		for _, m := range got {
			if err := sr.CompleteMessage(testContext(t), m, nil); err != nil {
				t.Fatal(err)
			}
		}
		delete(want, sr.SessionID())
	}
	if len(want) != 0 {
		t.Fatalf("sessions never accepted: %v", want)
	}
}

// sessionsState: session state set by one receiver is read by the next one that
// accepts the session, and cleared with nil.
func sessionsState(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{RequiresSession: true})
	ctx := testContext(t)
	id := fmt.Sprintf("state-%d", time.Now().UnixNano())
	sr := acceptSession(t, q, id)
	if st, err := sr.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("initial state %q, %v", st, err)
	}
	if err := sr.SetSessionState(ctx, []byte("checkpoint-7"), nil); err != nil {
		t.Fatal(err)
	}
	if err := sr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	again := acceptSession(t, q, id)
	if st, err := again.GetSessionState(ctx, nil); err != nil || string(st) != "checkpoint-7" {
		t.Fatalf("state after re-accept %q, %v", st, err)
	}
	if err := again.SetSessionState(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if st, err := again.GetSessionState(ctx, nil); err != nil || st != nil {
		t.Fatalf("cleared state %q, %v", st, err)
	}
}

// sessionsLockRenewal: renewing the session lock keeps a session (and its message) held
// past the lock duration.
func sessionsLockRenewal(t *testing.T, b Backend) {
	q, p := shortLockQueue(t, b, QueueOptions{RequiresSession: true, LockDuration: 2 * time.Second})
	sendAll(t, q.NewSender(t), sessionMessage("renewed", "m1"))
	sr := acceptSession(t, q, "renewed")
	m := receiveN(t, sr, 1)[0]
	ctx := testContext(t)
	end := time.Now().Add(p.LockDuration + p.LockDuration/2)
	for time.Now().Before(end) {
		time.Sleep(p.LockDuration / 3)
		if err := sr.RenewSessionLock(ctx, nil); err != nil {
			t.Fatalf("renew: %v", err)
		}
		if until := sr.LockedUntil(); !until.After(time.Now()) {
			t.Fatalf("LockedUntil %v after a renewal", until)
		}
	}
	if err := sr.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete after %v of renewals: %v", p.LockDuration+p.LockDuration/2, err)
	}
}

// sessionsLockLoss: a session lock left to expire goes to the next receiver with its
// message, delivery counted; the first receiver can no longer settle it.
func sessionsLockLoss(t *testing.T, b Backend) {
	q, p := shortLockQueue(t, b, QueueOptions{RequiresSession: true, LockDuration: time.Second})
	sendAll(t, q.NewSender(t), sessionMessage("lost", "m1"))
	first := acceptSession(t, q, "lost")
	m := receiveN(t, first, 1)[0]
	time.Sleep(p.LockDuration + p.LockDuration/2)
	second := acceptSession(t, q, "")
	if second.SessionID() != "lost" {
		t.Fatalf("next session %q", second.SessionID())
	}
	again := receiveN(t, second, 1)[0]
	if again.MessageID != "m1" || again.DeliveryCount != 2 {
		t.Fatalf("redelivered %q with delivery count %d, want m1 with 2", again.MessageID, again.DeliveryCount)
	}
	// The second receiver keeps the session while the first tries to settle: through
	// the SDK the first attempt is refused (lock lost), and the SDK retries after
	// re-accepting the session, which must fail while it is held. (Were the session free
	// by then, the SDK would re-accept it and report the retried settlement as done.)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(p.LockDuration / 4):
				_ = second.RenewSessionLock(testContext(t), nil)
			}
		}
	})
	err := first.CompleteMessage(testContext(t), m, nil)
	close(stop)
	wg.Wait()
	if err == nil {
		t.Fatal("the receiver that lost the session settled its message")
	}
	if err := second.CompleteMessage(testContext(t), again, nil); err != nil {
		t.Fatal(err)
	}
}

// sessionsRequestReply: requests on a plain queue answered on a session-enabled reply
// queue, many at once, each requester waiting on its own session.
func sessionsRequestReply(t *testing.T, b Backend) {
	replies := b.Queue(t, QueueOptions{RequiresSession: true})
	requests := b.Queue(t, QueueOptions{})
	req, err := reqreply.NewRequester(requests.NewSender(t), replies.Sessions(), replies.Name(), nil)
	if err != nil {
		t.Fatal(err)
	}
	replySender := replies.NewSender(t)
	resp, err := reqreply.NewResponder(func(string) (sbkit.MessageSender, error) { return replySender, nil })
	if err != nil {
		t.Fatal(err)
	}
	h, err := resp.Handler(func(ctx context.Context, m *azservicebus.ReceivedMessage) (*azservicebus.Message, error) {
		return &azservicebus.Message{Body: append([]byte("re: "), m.Body...)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	ctx := testContext(t)
	r := requests.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	var wg sync.WaitGroup
	wg.Go(func() {
		for handled := 0; handled < n; {
			msgs, err := r.ReceiveMessages(ctx, n, nil)
			if err != nil {
				t.Errorf("responder receive: %v", err)
				return
			}
			for _, m := range msgs {
				if err := h(ctx, m); err != nil {
					t.Errorf("responder: %v", err)
					return
				}
				if err := r.CompleteMessage(ctx, m, nil); err != nil {
					t.Errorf("responder complete: %v", err)
				}
				handled++
			}
		}
	})
	for i := range n {
		wg.Go(func() {
			body := fmt.Sprintf("q%d", i)
			reply, err := req.Request(ctx, &azservicebus.Message{Body: []byte(body)})
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			if string(reply.Body) != "re: "+body {
				t.Errorf("request %d: reply %q", i, reply.Body)
			}
		})
	}
	wg.Wait()
}

// sessionsProcessorFIFO: the session processor over many sessions with fewer slots
// handles every message once, each session's in order and never two of a session at
// once; its counts reconcile and the queue ends empty.
func sessionsProcessorFIFO(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{RequiresSession: true})
	const sessions, per = 8, 6
	var msgs []*azservicebus.Message
	for i := range per {
		for s := range sessions {
			msgs = append(msgs, sessionMessage(fmt.Sprintf("fifo-%d", s), fmt.Sprintf("fifo-%d-%d", s, i)))
		}
	}
	sendAll(t, q.NewSender(t), msgs...)
	var mu sync.Mutex
	seen := map[string][]string{}
	running := map[string]int{}
	h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		session, _ := receiver.SessionFrom(ctx)
		id := session.SessionID()
		mu.Lock()
		running[id]++
		if running[id] > 1 {
			t.Errorf("two handlers at once in session %s", id)
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		running[id]--
		seen[id] = append(seen[id], m.MessageID)
		mu.Unlock()
		return nil
	}
	p, err := receiver.NewSessionProcessor(q.Sessions(), h, &receiver.SessionOptions{
		MaxConcurrentSessions: 3, SessionIdleTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	waitFor(t, "every message handled", func() bool { return p.Stats().Completed >= sessions*per })
	if err := p.Close(testContext(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	for s := range sessions {
		id := fmt.Sprintf("fifo-%d", s)
		var want []string
		for i := range per {
			want = append(want, fmt.Sprintf("%s-%d", id, i))
		}
		if !slices.Equal(seen[id], want) {
			t.Errorf("session %s: %v, want %v", id, seen[id], want)
		}
	}
	if st := p.Stats(); st.Received != sessions*per || st.Completed != sessions*per || st.LocksLost != 0 || st.Sessions != 0 {
		t.Errorf("stats %+v", st)
	}
}

// sessionsProcessorLockRenewal: a handler that outlives the lock duration keeps its
// session: the processor renews the session lock.
func sessionsProcessorLockRenewal(t *testing.T, b Backend) {
	q, p := shortLockQueue(t, b, QueueOptions{RequiresSession: true, LockDuration: 2 * time.Second})
	sendAll(t, q.NewSender(t), sessionMessage("renew-proc", "slow"))
	sp, err := receiver.NewSessionProcessor(q.Sessions(), outlasting(p.LockDuration+p.LockDuration/2), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sp.Run(context.Background()) }()
	waitFor(t, "the slow message settled", func() bool {
		st := sp.Stats()
		return st.Completed+st.Abandoned+st.LocksLost > 0
	})
	_ = sp.Close(testContext(t))
	<-done
	if st := sp.Stats(); st.Completed != 1 || st.SessionLocksLost != 0 || st.SessionLocksRenewed < 1 {
		t.Errorf("stats %+v, want 1 completed after at least one session lock renewal", st)
	}
}
