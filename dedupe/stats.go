package dedupe

import "sync/atomic"

// Stats counts what a Filter did since it was made. Every delivery with a key adds one
// to Checked and then, unless it ended in a store failure or a cancelled context, to
// exactly one of Processed, Duplicates or LeaseHeld (or Unprotected, for a store
// failure under FailOpen).
type Stats struct {
	// Checked counts deliveries that had a key.
	Checked int64
	// Processed counts handler runs under a lease.
	Processed int64
	// Succeeded counts handler runs that returned nil (and were then marked done, or
	// reported through OnStoreError when marking failed).
	Succeeded int64
	// Duplicates counts deliveries skipped (sbkit.Skip) because their key was done.
	Duplicates int64
	// Contended counts deliveries that found their key leased by another owner.
	Contended int64
	// LeaseHeld counts deliveries abandoned with ErrLeaseHeld.
	LeaseHeld int64
	// StoreErrors counts failed store calls of every kind.
	StoreErrors int64
	// MarkFailures counts successful handler runs whose done mark could not be written.
	MarkFailures int64
	// LeasesLost counts handler runs whose lease another owner took while they ran
	// (a refresh found it gone): the handler outlived LeaseTTL without a refresh.
	LeasesLost int64
	// MissingKey counts deliveries without a key.
	MissingKey int64
	// Unprotected counts handler runs without duplicate protection (no key under
	// MissingKeyProcess, or a store failure under FailOpen).
	Unprotected int64
}

type counters struct {
	checked, processed, succeeded, duplicates, contended, leaseHeld,
	storeErrors, markFailures, leasesLost, missingKey, unprotected atomic.Int64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Checked:      c.checked.Load(),
		Processed:    c.processed.Load(),
		Succeeded:    c.succeeded.Load(),
		Duplicates:   c.duplicates.Load(),
		Contended:    c.contended.Load(),
		LeaseHeld:    c.leaseHeld.Load(),
		StoreErrors:  c.storeErrors.Load(),
		MarkFailures: c.markFailures.Load(),
		LeasesLost:   c.leasesLost.Load(),
		MissingKey:   c.missingKey.Load(),
		Unprotected:  c.unprotected.Load(),
	}
}
