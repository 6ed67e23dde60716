package sender

import "sync/atomic"

// Stats is a snapshot of a Sender's counters (cumulative) and gauges (current). Every
// message given to the Sender ends in exactly one of Sent, Failed and Rejected, and is
// counted in InFlightMessages meanwhile once accepted.
type Stats struct {
	// Sent counts accepted messages that the broker accepted; Failed those that failed
	// (each got a *SendError); Rejected the messages that were not accepted (window full,
	// Sender closed, context ended; nil messages are not counted).
	Sent, Failed, Rejected int64
	// SendRetries counts retries of messages (a retried batch of n messages counts n).
	SendRetries int64
	// BatchesSent counts batch requests that succeeded; BytesSent is the estimated size
	// ([sbkit.MessageSize]) of the messages sent.
	BatchesSent, BytesSent int64
	// InFlightMessages and InFlightBytes are the accepted messages without an outcome and
	// their estimated size. InFlightBytes stays within [Options.MaxInFlightBytes], except
	// while a single message larger than the window travels alone.
	InFlightMessages, InFlightBytes int64
	// PeakInFlightBytes is the largest InFlightBytes seen.
	PeakInFlightBytes int64
}

type counters struct {
	sent, failed, rejected, retried   atomic.Int64
	batches, bytes                    atomic.Int64
	inFlightMsgs, inFlightBytes, peak atomic.Int64
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
		Sent: c.sent.Load(), Failed: c.failed.Load(), Rejected: c.rejected.Load(), SendRetries: c.retried.Load(),
		BatchesSent: c.batches.Load(), BytesSent: c.bytes.Load(),
		InFlightMessages: c.inFlightMsgs.Load(), InFlightBytes: c.inFlightBytes.Load(),
		PeakInFlightBytes: c.peak.Load(),
	}
}
