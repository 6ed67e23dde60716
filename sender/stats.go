package sender

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a Sender's counters.
type Stats struct {
	// Sent and Failed count messages by outcome; Retried counts retries of messages (a
	// retried batch of n messages counts n).
	Sent, Failed, Retried int64
	// InFlightMessages and InFlightBytes are the accepted messages without an outcome and
	// their estimated size (Size); PeakInFlightBytes is the largest InFlightBytes seen.
	// InFlightBytes stays within Options.MaxInFlightBytes, except while a single message
	// larger than the window travels alone.
	InFlightMessages, InFlightBytes, PeakInFlightBytes int64
	// Batches counts batch requests that succeeded; Bytes is the estimated size of the
	// messages sent.
	Batches, Bytes int64
}

type counters struct {
	sent, failed, retried             atomic.Int64
	inFlightMsgs, inFlightBytes, peak atomic.Int64
	batches, bytes                    atomic.Int64
}

func (c *counters) addInFlight(size int64) {
	c.inFlightMsgs.Add(1)
	now := c.inFlightBytes.Add(size)
	for {
		p := c.peak.Load()
		if now <= p || c.peak.CompareAndSwap(p, now) {
			return
		}
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Sent: c.sent.Load(), Failed: c.failed.Load(), Retried: c.retried.Load(),
		InFlightMessages: c.inFlightMsgs.Load(), InFlightBytes: c.inFlightBytes.Load(),
		PeakInFlightBytes: c.peak.Load(), Batches: c.batches.Load(), Bytes: c.bytes.Load(),
	}
}

// Hook is an observer of a Sender's events. A Hook implements any of ResultHook,
// RetryHook and BatchHook; a value that implements none is ignored. Hook methods are
// called synchronously on the sender's goroutines, possibly concurrently: they must be
// fast, must not block and must not call the Sender. Panics are recovered and logged.
type Hook any

// ResultHook observes every message's outcome, before its Result is completed.
type ResultHook interface {
	OnSendResult(r *Result, err error)
}

// RetryHook observes every retry: messages is how many messages the failed request
// carried, attempt the number of the attempt that failed, wait the backoff before the next.
type RetryHook interface {
	OnSendRetry(messages, attempt int, err error, wait time.Duration)
}

// BatchHook observes every batch request: how many messages it carried, its size as
// the SDK measured it, its error and how long it took.
type BatchHook interface {
	OnBatch(messages int, bytes uint64, err error, elapsed time.Duration)
}
