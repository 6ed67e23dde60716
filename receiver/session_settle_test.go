package receiver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// orderLog records "<MessageID>#<DeliveryCount>" for every handler call and, as a
// SettleHook, "settled <MessageID>" for every settlement the broker accepted.
type orderLog struct {
	mu  sync.Mutex
	got []string
}

func (l *orderLog) add(m *azservicebus.ReceivedMessage) {
	l.mu.Lock()
	l.got = append(l.got, fmt.Sprintf("%s#%d", m.MessageID, m.DeliveryCount))
	l.mu.Unlock()
}

func (l *orderLog) OnSettle(_ context.Context, e receiver.Settlement) {
	if e.Err == nil {
		l.mu.Lock()
		l.got = append(l.got, "settled "+e.Message.MessageID)
		l.mu.Unlock()
	}
}

func (l *orderLog) calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// TestSessionSettleRetryKeepsOrder: a settlement that fails with a transient error is
// retried, and the session's next message is received only once it succeeded, so an
// abandoned message is handled again first (counting the failed attempt as the
// settlement would give a-0#1, a-1#1, a-2#1, a-0#2).
func TestSessionSettleRetryKeepsOrder(t *testing.T) {
	for _, op := range []sbtest.Op{sbtest.OpAbandon, sbtest.OpComplete} {
		t.Run(op.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sq := newSessionQueue(t, nil)
				sq.send(t, "a", "a-0", "a-1", "a-2")
				sq.q.InjectFault(sbtest.Fault{Op: op, Count: 1}) // transient
				log := &orderLog{}
				h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
					log.add(m)
					if op == sbtest.OpAbandon && m.MessageID == "a-0" && m.DeliveryCount == 1 {
						return errors.New("first attempt fails")
					}
					return nil
				}
				p, stop := startSessions(t, sq, h, &receiver.SessionOptions{Options: receiver.Options{Hooks: []receiver.Hook{log}}})
				waitDrained(t, sq.q)
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				want := []string{"a-0#1", "settled a-0", "a-1#1", "settled a-1", "a-2#1", "settled a-2"}
				if op == sbtest.OpAbandon {
					want = append([]string{"a-0#1", "settled a-0"}, want...)
					want[2] = "a-0#2"
				}
				if !slices.Equal(log.calls(), want) {
					t.Fatalf("handled %v, want %v", log.calls(), want)
				}
				if st := p.Stats(); st.SettleErrors != 1 || st.Completed != 3 || st.LocksLost != 0 {
					t.Fatalf("stats %+v", st)
				}
			})
		})
	}
}

// TestSessionSettleFailureGivesUpSession: a settlement that fails for good leaves its
// message locked by the session lock, so the session is given up at once: the message
// comes back, first and without a delivery counted, to the next receiver that accepts
// the session (here the same processor), before the session's later messages.
func TestSessionSettleFailureGivesUpSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "a-0", "a-1", "a-2")
		sq.q.InjectFault(sbtest.Fault{Op: sbtest.OpComplete, Count: 1, Err: sbtest.PermanentError})
		log := &orderLog{}
		errs := &errorLog{}
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			log.add(m)
			return nil
		}
		p, stop := startSessions(t, sq, h, &receiver.SessionOptions{Options: receiver.Options{Hooks: []receiver.Hook{errs}}})
		waitDrained(t, sq.q)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if want := []string{"a-0#1", "a-0#1", "a-1#1", "a-2#1"}; !slices.Equal(log.calls(), want) {
			t.Fatalf("handled %v, want %v", log.calls(), want)
		}
		st := p.Stats()
		if st.LocksLost != 1 || st.Completed != 3 || st.Received != 4 || st.SessionsAccepted != 2 {
			t.Fatalf("stats %+v", st)
		}
		checkReconciled(t, st.Stats)
		if n := errs.countIs(receiver.ErrSettleFailed); n != 1 {
			t.Fatalf("%d ErrSettleFailed reports, want 1", n)
		}
	})
}
