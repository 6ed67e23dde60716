// Package receiver runs a handler on every message of a Service Bus queue or
// subscription: a processor in the manner of the .NET ServiceBusProcessor, built on the
// narrow interfaces of package sbkit so that it runs on [*azservicebus.Receiver] and on
// sbtest's in-memory receiver alike.
//
// One goroutine per receiver calls ReceiveMessages (the SDK forbids concurrent calls on
// one receiver; [Options.MoreReceivers] adds receivers), asking each time for as many
// messages as there are free places (MaxConcurrency handlers plus the prefetch: messages
// waiting for a handler, or asked for by the calls in flight).
// Handlers run on at most MaxConcurrency goroutines. A settlement is handed to a
// goroutine of its own while it waits for the broker (the SDK's settlement calls block
// for a round trip; concurrent ones on one receiver are pipelined on its link), so a
// handler goroutine is free as soon as its handler returns and as many settlements are
// in flight as the rate and the round trip need; settle goroutines start on demand, end
// once idle, and are at most [Options.SettleConcurrency] (by default, one per place). A
// message keeps its place until its settlement is over, so that a broker slow to answer
// settlements cannot make the processor lock more messages than it has places.
//
// The prefetch sizes itself unless [Options.PrefetchCount] fixes it: the processor
// measures the receive round trip R, the handler time and the settlement time (moving
// averages), and keeps about 2 × μ × R places beyond the handlers', μ being the rate at
// which it can drain messages, so that the handlers stay busy across one receive round
// trip at a time, and no more: a message that waits in the buffer holds its lock, adds
// its wait to its latency, and is given back unhandled by a shutdown. Messages settling
// or held by AbandonDelay get places on top, and the whole is at most 64 ×
// MaxConcurrency, so the processor holds at most 65 × MaxConcurrency messages.
// [Stats.Prefetch] shows the current size. In peek-lock mode each call waits 1 ms after
// its first message for the rest (the SDK's TimeAfterFirstMessage, 20 ms by default)
// while the broker is not backed up, and, once it is, long enough for the batch it
// expects, but never longer than the messages already waiting keep the handlers busy:
// credits a call leaves open stay on the link, and azservicebus releases a message that
// arrives for them between two calls (no delivery counted; [Stats.CreditsLeft] bounds
// it), then makes the next call wait a round trip for the release's answer. R is the
// time from asking for a message to receiving it, measured on calls that got all they
// asked for. The session processor applies the same sizing to each session's receive
// loop when it runs more than one handler per session.
// docs/design/prefetch.md in the repository gives the reasoning, and
// docs/benchmarks.md the measurements.
//
// Settlement follows the handler's result (see [sbkit.Handler]): nil completes (unless
// auto-complete is off, when the handler settles through [SettlerFrom]);
// [sbkit.DeadLetter] and [sbkit.Defer] do what they say; [sbkit.Skip] completes and counts
// the message skipped; any other error, and a recovered panic, abandons (optionally after
// holding the message for [Options.AbandonDelay]).
//
// Recoverability, both opt-in: [Options.Redelivery] redelivers a failed message through
// the broker, by a copy scheduled on its entity at now + a backoff (a handler asks for it
// with [sbkit.RetryAfter]), completing the original once the copy is accepted and
// dead-lettering the message when its redeliveries are spent; [Options.Breaker] stops
// receiving while the handler's dependency is down and probes before it resumes. See
// [RedeliveryOptions] and [BreakerOptions] for the guarantees; docs/recoverability.md in
// the repository gives the measurements.
//
// In peek-lock mode the locks of received messages, handled or waiting, are renewed by a
// [locks.Engine] until they are settled or [Options.MaxAutoLockRenewalDuration] passes.
// When a lock is lost the handler's context is cancelled with a cause for which
// [sbkit.IsLockLost] is true, the loss is reported once (to the [ErrorHook]s, source
// SourceRenew), and the message is not settled: it counts in [Stats.LocksLost].
//
// Handlers must not read message.LockedUntil while they run (renewals write it); use
// [LockedUntilFrom].
//
// Defaults (nil *Options): peek-lock, 1 handler goroutine (as in .NET), the adaptive
// prefetch, a settlement in flight for every place, auto-complete on,
// locks renewed for up to 5 minutes, no abandon delay, a 30 s bound per settlement, 10 s
// of shutdown grace when Run's context ends.
//
// Shutdown (Close, or the end of Run's context) stops receiving, abandons waiting and held
// messages at once, lets running handlers finish while Close's context (or
// Options.ShutdownGrace) allows, then cancels them and abandons their messages, so that
// nothing stays locked until its lock expires; Close returns by its context's deadline
// even when the broker does not answer, reporting what it could not settle. Once Run has
// returned, Stats reconcile: every received message was completed, redelivered,
// abandoned, dead-lettered, deferred, counted LocksLost, or counted LeftLocked.
//
// What a restart costs in deliveries: a shutdown abandons the buffered messages (at most
// the prefetch; first, before the running handlers are waited for), the messages of
// handlers it had to cancel (at most MaxConcurrency), and those held by AbandonDelay;
// messages an ended Close left locked come back when their locks expire. Each abandon
// counts a delivery against the entity's MaxDeliveryCount (abandoning a peek-locked
// message increments its DeliveryCount: "Message transfers, locks, and settlement",
// https://learn.microsoft.com/azure/service-bus-messaging/message-transfers-locks-settlement),
// and azservicebus offers no way to give a received message back without counting one
// (docs/design/prefetch.md says why). Keeping the buffer to what the round trip needs is
// what keeps a restart cheap.
//
// Observation is through [Options.Hooks]: receive calls, handler starts (which may derive
// the handler's context, for a trace) and ends, settlements, and errors as [*Error] values
// that name their source (receive, handler, settle, renew), redelivery decisions
// ([RedeliveryHook]) and circuit breaker changes ([BreakerHook]); the lock engine's hooks get
// its events for the processor's messages. Errors also go to the optional [*slog.Logger].
//
// [SessionProcessor] processes session-enabled queues and subscriptions: it holds up to
// [SessionOptions.MaxConcurrentSessions] sessions and runs each one's messages through a
// Processor of its own, one at a time and in order by default (the next message only once
// the previous one is settled at the broker; a session whose message cannot be settled
// is given up at once, so that the message comes back first: see
// [SessionOptions.MaxConcurrentCallsPerSession]), renews session locks with the same
// lock engine, cancels a session's handlers when its lock is lost, releases idle
// sessions, and gives handlers the session (id, state) through [SessionFrom]. It accepts
// sessions through an [sbkit.SessionAcceptor]: [sbkit.NewQueueSessionAcceptor] or
// [sbkit.NewSubscriptionSessionAcceptor] over the SDK's client, or sbtest's
// Namespace.QueueSessionAcceptor in memory.
package receiver
