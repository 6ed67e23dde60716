package receiver

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// Why a session is given up.
const (
	releaseIdle      = "idle"
	releaseBound     = "bound"
	releaseUnsettled = "unsettled"
)

// sessionSource is the receiver a session's Processor reads: the session receiver, and
// the idle and message-count bounds that release the session. Order needs nothing more:
// the Processor counts a message against its places until its settlement is over, so
// with one call per session (no prefetch) the next message is received only once the
// previous one is settled at the broker, and an abandoned message is handled again
// before the ones after it. The Processor settles through it and tells it (ended) when
// it is done with each message.
type sessionSource struct {
	sbkit.Settler // the session receiver's settlements, unchanged
	sr            sbkit.SessionReceiver
	idle          time.Duration       // negative: no bound
	max           int                 // messages before release; 0 or less: no bound
	release       func(reason string) // asks the slot to give the session up; safe to call twice
	// activity, when set, is called after messages were received (before they are
	// handed out): the session lock's renewal limit starts again.
	activity func()

	mu          sync.Mutex
	outstanding map[*azservicebus.ReceivedMessage]struct{} // received, not yet settled
	received    int
	settled     chan struct{} // closed (and replaced) when outstanding shrinks
	givenUp     bool          // a message stayed unsettled: receive nothing more
}

func newSessionSource(sr sbkit.SessionReceiver, cfg *sessionConfig, release func(string)) *sessionSource {
	return &sessionSource{Settler: sr, sr: sr, idle: cfg.SessionIdleTimeout,
		max: cfg.MaxMessagesPerSession, release: release, settled: make(chan struct{}),
		outstanding: make(map[*azservicebus.ReceivedMessage]struct{})}
}

// ReceiveMessages receives up to n messages (fewer near the bound) within the idle
// timeout, with the receive loop's options. A session is released once every message it
// received was settled and it reached its bound or went idle (a session that goes idle
// while messages are still being handled is waited for, then received from again): the
// call then waits for ctx (the Processor's receive loop, which the release stops). Once
// a message stayed unsettled, it receives nothing more and waits for ctx.
func (s *sessionSource) ReceiveMessages(ctx context.Context, n int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error) {
	for {
		ask, wait, _ := s.room(n)
		switch {
		case ask < 0:
			s.release(releaseBound)
			<-ctx.Done()
			return nil, ctx.Err()
		case ask == 0:
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ictx, cancel := context.WithCancel(ctx)
		if s.idle >= 0 {
			ictx, cancel = context.WithTimeout(ctx, s.idle)
		}
		msgs, err := s.sr.ReceiveMessages(ictx, ask, o)
		cancel()
		if len(msgs) == 0 && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || (err == nil && ictx.Err() != nil)) {
			if _, wait, busy := s.room(n); busy {
				select {
				case <-wait: // a handled message was settled: receive again
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			s.release(releaseIdle)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		s.mu.Lock()
		for _, m := range msgs {
			// A session's messages are locked by the session lock, which the processor
			// renews: the expiry a message was received with says nothing after a renewal.
			m.LockedUntil = nil
			s.outstanding[m] = struct{}{}
		}
		s.received += len(msgs)
		s.mu.Unlock()
		if len(msgs) > 0 && s.activity != nil {
			s.activity()
		}
		return msgs, err
	}
}

// room returns how many of n messages may be received now: 0 while the bound is reached
// with messages unsettled, or once the session is given up (wait is closed when a
// message is settled), -1 once the bound is reached and every message settled. busy is
// whether messages are unsettled.
func (s *sessionSource) room(n int) (ask int, wait <-chan struct{}, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	busy = len(s.outstanding) > 0
	switch {
	case s.givenUp:
		return 0, s.settled, busy
	case s.max <= 0:
		return n, s.settled, busy
	case s.received < s.max:
		return min(n, s.max-s.received), s.settled, busy
	case busy:
		return 0, s.settled, true
	}
	return -1, s.settled, false
}

// ended records that the Processor is done with m: settled at the broker (err nil; in
// ReceiveAndDelete mode, handled), or not. An unsettled message stays locked by the
// session lock, so the next receive would pass it by; the session is given up instead,
// which hands it back, before the session's later messages and without a delivery
// counted, to the next receiver that accepts the session.
// Source: Service Bus docs, "Message sessions"
// (https://learn.microsoft.com/azure/service-bus-messaging/message-sessions): the session
// lock is an umbrella for the message locks, and closing a session does not count its
// unsettled messages' deliveries.
func (s *sessionSource) ended(m *azservicebus.ReceivedMessage, err error) {
	s.mu.Lock()
	if err != nil {
		s.givenUp = true
		s.mu.Unlock()
		s.release(releaseUnsettled)
		return
	}
	if _, ok := s.outstanding[m]; ok {
		delete(s.outstanding, m)
		close(s.settled)
		s.settled = make(chan struct{})
	}
	s.mu.Unlock()
}
