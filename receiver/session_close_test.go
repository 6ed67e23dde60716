package receiver_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/sbtest"
)

// TestSessionCloseFromHandler: Close called from a handler with its context starts the
// shutdown and returns at once (waiting would be waiting for Run, which waits for the
// handler); the handler's message is settled, the other session's running handler is
// cut at Close's deadline, and Run returns nil.
func TestSessionCloseFromHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1", "2")
		sq.send(t, "b", "1")
		var p *receiver.SessionProcessor
		type result struct {
			err  error
			took time.Duration
		}
		closed := make(chan result, 1)
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			if sessionID(ctx) == "b" {
				<-ctx.Done() // a handler of another session, cut by the shutdown
				return context.Cause(ctx)
			}
			for p.Stats().InFlight < 2 {
				time.Sleep(time.Millisecond)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second) // its deadline outlives the handler
			defer cancel()
			start := time.Now()
			err := p.Close(cctx)
			closed <- result{err, time.Since(start)}
			return nil
		}
		var err error
		p, err = receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, &receiver.SessionOptions{MaxConcurrentSessions: 2})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Run has not returned a minute after a handler called Close")
		}
		if r := <-closed; r.err != nil || r.took != 0 {
			t.Fatalf("Close from a handler = %v after %v, want nil at once", r.err, r.took)
		}
		st := p.Stats()
		if st.Completed != 1 || st.Abandoned != 1 || st.Received != 2 || st.Sessions != 0 {
			t.Fatalf("stats %+v", st)
		}
		if err := p.Run(context.Background()); !errors.Is(err, receiver.ErrClosed) {
			t.Fatalf("Run after Close = %v", err)
		}
		synctest.Wait()
		if left := processorGoroutines(); left != "" {
			t.Errorf("goroutines left after Close:\n%s", left)
		}
	})
}

// TestSessionCloseKeepsDeadlineWhileHandlersRun: as TestCloseKeepsDeadlineWhileHandlersRun
// for the session processor: Close returns by its deadline while a handler ignores its
// cancelled context or waits in Close called with a context of its own; Run returns once
// the handler does, and no goroutine is left.
func TestSessionCloseKeepsDeadlineWhileHandlersRun(t *testing.T) {
	testHandlerOutlastsClose(t, func(t *testing.T, h sbkit.Handler) outlasted {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1")
		p, err := receiver.NewSessionProcessor(sq.ns.QueueSessionAcceptor("q", nil), h, nil)
		if err != nil {
			t.Fatal(err)
		}
		return outlasted{
			close: p.Close,
			run: func() func() error {
				done := make(chan error, 1)
				go func() { done <- p.Run(context.Background()) }()
				return func() error { return <-done }
			},
			stats: func() receiver.Stats { return p.Stats().Stats },
			after: func(t *testing.T) {
				synctest.Wait()
				if left := processorGoroutines(); left != "" {
					t.Errorf("goroutines left after Run:\n%s", left)
				}
			},
		}
	})
}

// hungAcceptor accepts through an sbtest acceptor, but the session receivers it returns
// never answer Close (a broker that stopped answering): Close returns when its context
// ends.
type hungAcceptor struct{ sbkit.SessionAcceptor }

func (a hungAcceptor) AcceptNextSession(ctx context.Context) (sbkit.SessionReceiver, error) {
	sr, err := a.SessionAcceptor.AcceptNextSession(ctx)
	if err != nil {
		return nil, err
	}
	return hungClose{sr}, nil
}

type hungClose struct{ sbkit.SessionReceiver }

func (hungClose) Close(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSessionCloseHungBroker: with a broker that answers nothing any more (settlements,
// session lock renewals and closing the session receiver all hang), Close returns by its
// deadline (closing a session receiver waits no longer than Close's context, not
// SettleTimeout's 30 s), reporting the messages it left locked; no goroutine is left.
func TestSessionCloseHungBroker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sq := newSessionQueue(t, nil)
		sq.send(t, "a", "1")
		sq.send(t, "b", "1")
		h := func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		errs := &errorLog{}
		p, err := receiver.NewSessionProcessor(hungAcceptor{sq.ns.QueueSessionAcceptor("q", nil)}, h,
			&receiver.SessionOptions{Options: receiver.Options{Hooks: []receiver.Hook{errs}}})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(context.Background()) }()
		for p.Stats().InFlight < 2 {
			time.Sleep(time.Millisecond)
		}
		for _, op := range []sbtest.Op{sbtest.OpAbandon, sbtest.OpComplete, sbtest.OpRenewSessionLock, sbtest.OpReceive} {
			sq.q.InjectFault(sbtest.Fault{Op: op, Hang: true})
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		closeErr := p.Close(ctx)
		if took := time.Since(start); took > time.Second {
			t.Errorf("Close took %v with a 1 s deadline", took)
		}
		if !errors.Is(closeErr, context.DeadlineExceeded) {
			t.Errorf("Close = %v, want the deadline", closeErr)
		}
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		st := p.Stats()
		if st.LeftLocked != 2 || st.Sessions != 0 {
			t.Errorf("stats %+v", st)
		}
		checkReconciled(t, st.Stats)
		if n := errs.countIs(receiver.ErrLeftLocked); n != 2 {
			t.Errorf("%d ErrLeftLocked reports, want 2", n)
		}
		synctest.Wait()
		if left := processorGoroutines(); left != "" {
			t.Errorf("goroutines left after Close:\n%s", left)
		}
	})
}
