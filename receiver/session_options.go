package receiver

import (
	"fmt"
	"time"
)

const (
	// DefaultMaxConcurrentSessions is how many sessions a SessionProcessor holds at once
	// when [SessionOptions.MaxConcurrentSessions] is zero: 8, .NET's default.
	DefaultMaxConcurrentSessions = 8
	// DefaultMaxConcurrentCallsPerSession is how many handlers run at once in one session
	// when [SessionOptions.MaxConcurrentCallsPerSession] is zero: 1, .NET's default, which
	// handles a session's messages strictly one after the other, in order.
	DefaultMaxConcurrentCallsPerSession = 1
	// DefaultSessionIdleTimeout is how long a session may go without a message before it
	// is released when [SessionOptions.SessionIdleTimeout] is zero: 1 s. .NET waits its
	// try timeout (60 s), which holds a slot for a minute after a session's last message;
	// with few slots and many short sessions that starves the other sessions, so sbkit
	// releases sooner. A session that gets a message later is accepted again.
	DefaultSessionIdleTimeout = time.Second
)

// SessionOptions configure a SessionProcessor. A nil *SessionOptions and the zero value
// mean the defaults; negative values follow [Options]' rule, as each field says.
type SessionOptions struct {
	// Options configure how each session's messages are processed, as for a [Processor],
	// with these differences: MaxConcurrentCallsPerSession replaces MaxConcurrency, which
	// must be zero; with one call per session (the default) messages are never prefetched,
	// so that order holds: PrefetchCount must then be zero (DisablePrefetch changes
	// nothing); with more, each session's receive loop prefetches as a Processor's does
	// (adaptively by default, sized from the receive round trip, handler and settlement
	// times measured across all sessions), and a session reaching MaxMessagesPerSession is
	// released only once every message it received has been settled, so that none is given
	// back unhandled; SettleConcurrency caps each session's settlements in flight (by
	// default its places: one with one call per session, whose next message waits for the
	// previous one's settlement, as order needs; more, settled concurrently, with more
	// calls); DisableAutoLockRenewal, MaxAutoLockRenewalDuration and LockRenewal apply to
	// the session locks (a session's messages are locked by its session lock); ShutdownGrace
	// also bounds how long a released session's running handlers may finish. Hooks and
	// Logger are shared by every session.
	Options
	// MaxConcurrentSessions is how many sessions are held at once. Default
	// DefaultMaxConcurrentSessions (8); negative is an error (each session held takes a
	// goroutine and a lock).
	MaxConcurrentSessions int
	// MaxConcurrentCallsPerSession is how many handlers run at once in one session.
	// Default DefaultMaxConcurrentCallsPerSession (1): one message at a time, in order:
	// the next message is received only once the previous one is settled at the broker
	// (a failed settlement attempt is retried first, as SettleRetry allows), so an
	// abandoned message is handled again before the ones after it. When a settlement
	// fails for good, the message stays locked by the session lock, and the service
	// delivers a locked session's messages only to the receiver holding that lock: the
	// processor then gives the session up at once, and the message comes back first,
	// without a delivery counted, to the next receiver that accepts the session (this
	// processor or another). If the session lock itself is lost, the session goes to the
	// next acceptor too, its unsettled messages' deliveries counted. Either way no later
	// message of the session is handled before it. Above 1, messages of a session may be
	// handled out of order. Negative is an error (the handlers must be bounded).
	MaxConcurrentCallsPerSession int
	// SessionIdleTimeout releases a session after it went this long without a message.
	// Default DefaultSessionIdleTimeout (1 s); negative means never: a session is then
	// released only at MaxMessagesPerSession, when its lock is lost (its renewal stops
	// MaxAutoLockRenewalDuration after its last message), or at shutdown, and an idle
	// session keeps its slot from the other sessions meanwhile.
	SessionIdleTimeout time.Duration
	// MaxMessagesPerSession releases a session after this many of its messages were
	// received, so that many sessions share few slots fairly; the session is accepted
	// again later if it has more. Default (zero), and negative: no bound.
	MaxMessagesPerSession int
	// SessionIDs, when not empty, are the only sessions processed, accepted by id (each
	// is locked even while it has no messages), as .NET's SessionIds. Default: every
	// session, the next available one each time a slot is free.
	SessionIDs []string
}

// sessionConfig is SessionOptions resolved.
type sessionConfig struct {
	SessionOptions
	inner Options // the options of each session's Processor
}

func newSessionConfig(o *SessionOptions) (sessionConfig, error) {
	var c sessionConfig
	if o != nil {
		c.SessionOptions = *o
		c.SessionIDs = append([]string(nil), o.SessionIDs...)
	}
	switch {
	case c.MaxConcurrentSessions < 0:
		return c, fmt.Errorf("%w: negative MaxConcurrentSessions %d", ErrInvalidOptions, c.MaxConcurrentSessions)
	case c.MaxConcurrentCallsPerSession < 0:
		return c, fmt.Errorf("%w: negative MaxConcurrentCallsPerSession %d", ErrInvalidOptions, c.MaxConcurrentCallsPerSession)
	case c.MaxConcurrency != 0:
		return c, fmt.Errorf("%w: MaxConcurrency %d: a SessionProcessor runs MaxConcurrentCallsPerSession handlers per session and has no use for it",
			ErrInvalidOptions, c.MaxConcurrency)
	}
	if c.MaxConcurrentSessions == 0 {
		c.MaxConcurrentSessions = DefaultMaxConcurrentSessions
	}
	if c.MaxConcurrentCallsPerSession == 0 {
		c.MaxConcurrentCallsPerSession = DefaultMaxConcurrentCallsPerSession
	}
	if c.SessionIdleTimeout == 0 {
		c.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if c.MaxConcurrentCallsPerSession == 1 && c.PrefetchCount != 0 {
		return c, fmt.Errorf("%w: PrefetchCount %d with one call per session, whose messages are never prefetched so that order holds (prefetch needs MaxConcurrentCallsPerSession above 1)",
			ErrInvalidOptions, c.PrefetchCount)
	}
	if c.Redelivery != nil {
		return c, fmt.Errorf("%w: Redelivery with sessions: %w", ErrInvalidOptions, ErrSessionRedelivery)
	}
	if len(c.MoreReceivers) > 0 {
		return c, fmt.Errorf("%w: MoreReceivers with sessions: a session has one receiver", ErrInvalidOptions)
	}
	c.inner = c.Options
	c.inner.Breaker = nil // the sessions share the SessionProcessor's breaker
	c.inner.MaxConcurrency = c.MaxConcurrentCallsPerSession
	if c.MaxConcurrentCallsPerSession == 1 {
		c.inner.DisablePrefetch = true // in order: see Options
	}
	c.inner.DisableAutoLockRenewal = true // the session lock is renewed instead
	// Validate everything else the way a Processor does.
	if _, err := newConfig(&c.inner); err != nil {
		return c, err
	}
	return c, nil
}
