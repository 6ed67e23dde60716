package dedupe

import "sync/atomic"

// Stats is a snapshot of what a [Filter] did since it was made (counters) and is doing
// now (gauges). Every delivery with a key adds one to Checked and then, unless its
// context ended while it waited, to exactly one of Processed, DuplicatesSkipped,
// ContendedAbandoned and StoreDownAbandoned (or Unprotected, for a store failure under
// [FailOpen]).
type Stats struct {
	// Checked counts deliveries that had a key.
	Checked int64
	// Processed counts handler runs under a lease.
	Processed int64
	// Succeeded counts handler runs that returned nil (and were then marked done, or
	// counted in MarkDoneErrors).
	Succeeded int64
	// DuplicatesSkipped counts deliveries skipped ([sbkit.Skip]) because their key was
	// done.
	DuplicatesSkipped int64
	// Contended counts deliveries that found their key leased by another owner.
	Contended int64
	// ContendedAbandoned counts deliveries abandoned with [ErrLeaseHeld].
	ContendedAbandoned int64
	// StoreDownAbandoned counts deliveries abandoned ([FailClosed]) because Acquire still
	// failed when [Options.Retry] ran out.
	StoreDownAbandoned int64
	// AcquireRetries counts Acquire calls retried after a store failure ([FailClosed]).
	AcquireRetries int64
	// StoreErrors counts failed store calls of every kind.
	StoreErrors int64
	// MarkDoneErrors counts failed MarkDone calls: successful handler runs whose done mark
	// could not be written.
	MarkDoneErrors int64
	// LeasesRenewed counts successful lease refreshes.
	LeasesRenewed int64
	// LeasesLost counts handler runs whose lease was lost while they ran (their context
	// was cancelled with a cause wrapping [ErrLeaseLost]).
	LeasesLost int64
	// Unkeyed counts deliveries without a key.
	Unkeyed int64
	// Unprotected counts handler runs without duplicate protection (no key under
	// [MissingKeyProcess], or a store failure under [FailOpen]).
	Unprotected int64

	// Held is the number of deliveries waiting now, for another owner's lease or for
	// the store to answer.
	Held int64
	// Running is the number of handlers running now under a lease.
	Running int64
}

type counters struct {
	checked, processed, succeeded, duplicatesSkipped, contended, contendedAbandoned,
	storeDownAbandoned, acquireRetries, storeErrors, markDoneErrors, leasesRenewed,
	leasesLost, unkeyed, unprotected, held, running atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Checked:            c.checked.Load(),
		Processed:          c.processed.Load(),
		Succeeded:          c.succeeded.Load(),
		DuplicatesSkipped:  c.duplicatesSkipped.Load(),
		Contended:          c.contended.Load(),
		ContendedAbandoned: c.contendedAbandoned.Load(),
		StoreDownAbandoned: c.storeDownAbandoned.Load(),
		AcquireRetries:     c.acquireRetries.Load(),
		StoreErrors:        c.storeErrors.Load(),
		MarkDoneErrors:     c.markDoneErrors.Load(),
		LeasesRenewed:      c.leasesRenewed.Load(),
		LeasesLost:         c.leasesLost.Load(),
		Unkeyed:            c.unkeyed.Load(),
		Unprotected:        c.unprotected.Load(),
		Held:               c.held.Load(),
		Running:            c.running.Load(),
	}
}
