// Package locks renews the peek-locks of received Service Bus messages automatically.
//
// An Engine tracks any number of locked messages with one scheduler goroutine (a min-heap
// ordered by due time and a single timer), so that thousands of locks need neither
// thousands of goroutines nor thousands of timers. A renewal call blocks for a round trip
// to the broker, so each one in flight has a goroutine: they are started as renewals come
// due, up to [Options.Workers] at once (256 by default), and end once idle. Many locks
// due at once (a receive call's messages are locked together) are renewed together, not
// queued behind a small pool.
//
// Each renewal is scheduled from the message's LockedUntil, a margin before it: the margin
// is a third of the lock duration observed, capped at [Options.MaxMargin] (10 s by
// default), so that a 60 s lock is renewed 10 s before it expires and a 6 s lock 2 s
// before. Failed renewals are retried with an exponential backoff ([Options.Retry]) while
// the lock is still valid. Renewal stops when the lock is released (the message was
// settled) or when [Options.MaxAutoLockRenewalDuration] has passed since the lock was
// added.
//
// When a lock is lost (the broker answers CodeLockLost, the lock expires before it could be
// renewed, the renewal limit was reached and the lock ran out, or the renewal failed for
// good) the engine reports it exactly once, to the [LockLostHook]s of [Options.Hooks] and
// through [Lock.Done] and [Lock.Err], with a [*LostError] that wraps [sbkit.ErrLockLost]
// and says why. Renewals and failed attempts go to [RenewHook] and [RenewErrorHook].
//
// The engine is the only writer of message.LockedUntil for the messages it tracks
// ([azservicebus.Receiver.RenewMessageLock] writes that field). Other goroutines must not
// read the field while the message is tracked; they read [Lock.LockedUntil] instead.
// [Lock.Release] waits for an in-flight renewal of its message to return, so after
// Release the message may be handed to a settlement call safely.
//
// LockedUntil is set by the broker's clock and compared with the local one: keep clocks
// synchronised (NTP), or a lock may be renewed late or reported expired too early.
package locks
