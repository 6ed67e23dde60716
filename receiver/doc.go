// Package receiver runs a handler on every message of a Service Bus queue or
// subscription: a processor in the manner of the .NET ServiceBusProcessor, built on the
// narrow interfaces of package sbkit so that it runs on [*azservicebus.Receiver] and on
// sbtest's in-memory receiver alike.
//
// One goroutine calls ReceiveMessages (the SDK forbids concurrent calls), asking each time
// for as many messages as there are free places (MaxConcurrency handlers plus
// PrefetchCount waiting messages). Handlers run on at most MaxConcurrency goroutines.
// Settlement happens on a separate bounded pool, so a handler goroutine is free as soon
// as its handler returns.
//
// Settlement follows the handler's result (see [sbkit.Handler]): nil completes (unless
// auto-complete is off, when the handler settles through [SettlerFrom]);
// [sbkit.DeadLetter] and [sbkit.Defer] do what they say; [sbkit.Skip] completes and counts
// the message skipped; any other error, and a recovered panic, abandons (optionally after
// holding the message for [Options.AbandonDelay]).
//
// In peek-lock mode the locks of received messages, handled or waiting, are renewed by a
// [locks.Engine] until they are settled or [Options.MaxAutoLockRenewalDuration] passes.
// When a lock is lost the handler's context is cancelled with a cause for which
// [sbkit.IsLockLost] is true, the loss is reported once (to the [ErrorHook]s, source
// SourceRenew), and the message is not settled: it counts in [Stats.LocksLost].
//
// Handlers must not read message.LockedUntil while they run (renewals write it); use
// LockedUntil(ctx).
//
// Defaults (nil *Options): peek-lock, 1 handler goroutine (as in .NET), 4 × MaxConcurrency
// prefetched messages, max(8, 2 × MaxConcurrency) settle goroutines, auto-complete on,
// locks renewed for up to 5 minutes, no abandon delay, a 30 s bound per settlement, 10 s
// of shutdown grace when Run's context ends.
//
// Shutdown (Close, or the end of Run's context) stops receiving, abandons waiting and held
// messages at once, lets running handlers finish while Close's context (or
// Options.ShutdownGrace) allows, then cancels them and abandons their messages, so that
// nothing stays locked until its lock expires; Close returns by its context's deadline
// even when the broker does not answer, reporting what it could not settle. Once Run has
// returned, Stats reconcile: every received message was completed, abandoned,
// dead-lettered, deferred, counted LocksLost, or counted LeftLocked.
//
// Observation is through [Options.Hooks]: receive calls, handler starts (which may derive
// the handler's context, for a trace) and ends, settlements, and errors as [*Error] values
// that name their source (receive, handler, settle, renew); the lock engine's hooks get
// its events for the processor's messages. Errors also go to the optional [*slog.Logger].
//
// [SessionProcessor] processes session-enabled queues and subscriptions: it holds up to
// [SessionOptions.MaxConcurrentSessions] sessions and runs each one's messages through a
// Processor of its own, one at a time and in order by default, renews session locks with
// the same lock engine, cancels a session's handlers when its lock is lost, releases idle
// sessions, and gives handlers the session (id, state) through [SessionFrom].
package receiver
