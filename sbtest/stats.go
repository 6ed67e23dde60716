package sbtest

import "sync/atomic"

// EntityStats counts what happened on an entity since it was created. For a subscription,
// Sent counts the copies it received from its topic; a Topic's own stats count the send
// requests (Sent, Batches, Scheduled, Cancelled, DuplicatesDropped, in-flight figures).
type EntityStats struct {
	// Sent is the number of messages stored (scheduled ones included, dropped duplicates
	// excluded).
	Sent int64
	// Batches is the number of SendBatch requests that stored messages.
	Batches int64
	// Scheduled is the number of messages stored in the scheduled state.
	Scheduled int64
	// Cancelled is the number of scheduled messages cancelled.
	Cancelled int64
	// Received is the number of deliveries (ReceiveMessages and ReceiveDeferredMessages).
	Received int64
	// Completed, Abandoned, DeadLettered, Deferred and Renewed count successful
	// settlements and renewals. DeadLettered includes the broker's own dead-lettering
	// (MaxDeliveryCountExceeded, TTL expiry).
	Completed, Abandoned, DeadLettered, Deferred, Renewed int64
	// Released counts locked messages given back without a delivery counted: the
	// released outcome (AMQP 1.0 part 3.4.4), which azservicebus sends for the messages
	// that arrive for a receive's open credits after it returned (receiver.go,
	// newReleaserFunc), and deliveries the server could no longer send.
	Released int64
	// LockExpired counts locks lost by expiry or ExpireLock.
	LockExpired int64
	// Expired counts messages whose TTL ran out before delivery.
	Expired int64
	// DuplicatesDropped counts sends dropped by duplicate detection.
	DuplicatesDropped int64
	// InFlightSends is the number of send/batch/schedule requests inside the broker now;
	// PeakInFlightSends the most there ever were at once.
	InFlightSends, PeakInFlightSends int64
	// PeakInFlightBytes is the most bytes (sbkit.MessageSize) of send requests ever inside the
	// broker at once.
	PeakInFlightBytes int64
	// SessionsAccepted counts session locks taken (AcceptSession, AcceptNextSession);
	// SessionLocksRenewed counts RenewSessionLock calls that succeeded;
	// SessionLocksExpired counts session locks lost by expiry or ExpireSessionLock.
	SessionsAccepted, SessionLocksRenewed, SessionLocksExpired int64
}

type counters struct {
	sent, batches, scheduled, cancelled, received              atomic.Int64
	completed, abandoned, deadLettered, deferred, renewed      atomic.Int64
	lockExpired, expired, duplicates, released                 atomic.Int64
	inFlight, peakInFlight, inFlightBytes, peakInFlightBytes   atomic.Int64
	sessionsAccepted, sessionLocksRenewed, sessionLocksExpired atomic.Int64
}

func (c *counters) snapshot() EntityStats {
	return EntityStats{
		Sent: c.sent.Load(), Batches: c.batches.Load(), Scheduled: c.scheduled.Load(),
		Cancelled: c.cancelled.Load(), Received: c.received.Load(), Completed: c.completed.Load(),
		Abandoned: c.abandoned.Load(), DeadLettered: c.deadLettered.Load(), Deferred: c.deferred.Load(),
		Renewed: c.renewed.Load(), Released: c.released.Load(), LockExpired: c.lockExpired.Load(), Expired: c.expired.Load(),
		DuplicatesDropped: c.duplicates.Load(), InFlightSends: c.inFlight.Load(),
		PeakInFlightSends: c.peakInFlight.Load(), PeakInFlightBytes: c.peakInFlightBytes.Load(),
		SessionsAccepted: c.sessionsAccepted.Load(), SessionLocksRenewed: c.sessionLocksRenewed.Load(),
		SessionLocksExpired: c.sessionLocksExpired.Load(),
	}
}

func storeMax(p *atomic.Int64, v int64) {
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

// enter records a send request of n bytes entering the broker; the returned func records
// it leaving.
func (c *counters) enter(n int64) func() {
	storeMax(&c.peakInFlight, c.inFlight.Add(1))
	storeMax(&c.peakInFlightBytes, c.inFlightBytes.Add(n))
	return func() {
		c.inFlight.Add(-1)
		c.inFlightBytes.Add(-n)
	}
}
