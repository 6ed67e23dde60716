// Package dedupe skips duplicate deliveries of a message, recognised by its MessageId,
// without ever losing a message.
//
// Service Bus delivers at least once: when CompleteMessage fails after the handler did its
// work (a lost lock, a dropped connection, sometimes minutes into the work), the broker
// delivers the message again and the work would be done twice. The documented remedy is
// to recognise the second delivery by its MessageId and skip it. A [Filter] does that as
// receiver middleware ([sbkit.Middleware]), in two phases around the handler:
//
//  1. Acquire a processing lease on the message's key (a TTL'd entry with an owner
//     token). A key already marked done means a duplicate: the delivery returns
//     [sbkit.Skip]("duplicate") without running the handler, so the processor completes
//     it. A key leased by another worker means a concurrent duplicate: it waits for the
//     lease to end (or, with [ContendedAbandon], returns at once) and is abandoned with an
//     error wrapping [ErrLeaseHeld] if it is still held; it is never completed unprocessed.
//  2. Run the handler, refreshing the lease every LeaseRenewal while it runs (so a
//     live worker keeps its lease however long the handler takes, and a crashed one
//     loses it after LeaseTTL). A failed refresh is retried with backoff within the
//     lease's remaining time. When the lease is lost anyway (no refresh succeeded within
//     LeaseTTL, or the key was found taken), the handler's context is cancelled with a
//     cause wrapping [ErrLeaseLost], before another worker can take the key, so that
//     two workers never both finish the work. Only when it returns nil is the key
//     marked done for the dedupe window; any other result (an error, a dead-letter, defer or skip marker, a panic)
//     releases the lease, so a redelivery is processed again. A failed handler never
//     leaves a mark: marking it done would be silent message loss. A handler's own
//     [sbkit.Skip] (say, an expired message) is not marked either: the work was not done,
//     so a redelivery should be judged afresh; a deferred message is received again by
//     sequence number and must find its key free.
//
// When the store cannot be reached, the default [FailClosed] holds the delivery and
// retries (see [FailClosed] for the worst case) rather than abandon it at once, so that a
// short outage burns no delivery counts.
//
// The middleware expresses the settlement only through its return value, as the
// processor of package receiver expects (nil and Skip complete, other errors abandon).
//
// Observe a Filter through [Options.Hooks] (fresh, duplicate, contended, lease lost,
// store errors: see [Hook]) and [Filter.Stats].
//
// Stores implement the three-method [Store] interface: [MemoryStore] (bounded, lazy
// expiry, no goroutine) for a single process, and for many workers the Redis store in
// the nested module [github.com/sbkit/sbkit/dedupe/redisdedupe] and the PostgreSQL store
// in [github.com/sbkit/sbkit/dedupe/pgdedupe] (whose TxFilter also commits the done mark
// in the handler's own transaction). Package
// [github.com/sbkit/sbkit/dedupe/storetest] holds a conformance suite for any Store, and
// [CheckArgs] the argument check it expects every Store to make.
package dedupe
