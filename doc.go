// Package sbkit is the shared vocabulary of the sbkit toolkit for Azure Service Bus.
//
// It holds the narrow interfaces that the toolkit consumes and that the official SDK's
// *azservicebus.Sender, *azservicebus.Receiver and *azservicebus.SessionReceiver satisfy
// (checked at compile time), the handler and middleware types that the receiver package
// runs, the settlement markers a handler returns to ask for dead-lettering, deferral or
// skipping, error classification helpers, and time-to-live (expiry) arithmetic.
//
// The packages built on it:
//
//   - sender: a bounded, pipelined, auto-batching sender that reports every outcome.
//   - receiver and locks: a peek-lock processor with automatic lock renewal, and a
//     session processor for session-enabled entities.
//   - dedupe: MessageId duplicate skipping that marks a message only after success
//     (stores in memory, and in the nested modules dedupe/redisdedupe and dedupe/pgdedupe).
//   - serialize: decoding by ContentType with fallbacks and dead-lettering.
//   - reqreply: request/reply over sessions.
//   - sbtest: an in-memory Service Bus for tests and benchmarks, and NewServer, the same
//     behind AMQP for the real SDK client (cmd/sbemulator serves it as a command).
//   - otel (nested module, package sbotel): OpenTelemetry traces and metrics from the
//     hooks.
//   - outbox/pgoutbox (nested module): a transactional outbox on PostgreSQL, relayed
//     through sender.
//
// Nothing in this package starts goroutines; every function is safe for concurrent use.
//
// # Conventions
//
// Every package has the same shapes, so that what is learnt in one holds in the others:
//
//   - Configuration is an *Options struct: nil and the zero value mean the defaults, and
//     each field states its default. Disable* booleans turn a feature off. A negative
//     number or duration means no limit where no limit makes sense (ShutdownGrace,
//     MaxAutoLockRenewalDuration, SessionIdleTimeout, ...), and is an error wrapping the
//     package's ErrInvalidOptions where it does not (a bound that keeps memory,
//     goroutines, locks or waits finite); each field says which. [RetryOptions] keeps the
//     meanings of [azservicebus.RetryOptions], which SDK users know: a negative
//     MaxRetries means no retries, a negative RetryDelay no delay, a negative
//     MaxRetryDelay no cap.
//   - Constructors fail on what would fail later. Options out of range wrap the
//     package's ErrInvalidOptions. A nil dependency is the package's ErrNil sentinel for
//     it (sender.ErrNilDestination, receiver.ErrNilReceiver, dedupe.ErrNilStore,
//     serialize.ErrNilRegistry, ...); a nil handler, or a nil function a handler is made
//     of, wraps [ErrNilHandler]; a nil message is [ErrNilMessage] everywhere.
//   - Observation is Options.Hooks, a []Hook of values that implement any of the
//     package's small optional interfaces, each one method On<Event>(ctx, payload);
//     constructors refuse a hook that implements none, so that a misspelt method is not
//     ignored. An error hook (On...Error) receives the package's error type by pointer
//     (*receiver.Error, *locks.RenewError, *dedupe.StoreError, *pgdedupe.TxError,
//     *serialize.UndecodableError): the error itself, whose fields carry the data; other
//     hooks receive an event struct by value. Every hook interface has its <Hook>Func,
//     which adapts a function to it (receiver.ErrorHookFunc, sender.SendResultHookFunc,
//     ...). A hook that panics is recovered and logged at Error under its interface's
//     name ("receiver: recovered panic in SettleHook"), and the next hook runs.
//     Stats() returns a snapshot whose counters name what they count: outcomes in the
//     past tense (Sent, Failed, Completed), failed calls <Op>Errors (SettleErrors,
//     StoreErrors), retries <Op>Retries (SendRetries, AcquireRetries), duplicates by
//     what was done with them (DuplicatesSkipped by a consumer's filter,
//     DuplicatesDropped by the broker).
//   - What a handler's context carries is read with <What>From(ctx): receiver.SettlerFrom,
//     SessionFrom and LockedUntilFrom, dedupe.LeaseFrom, pgdedupe.TxFrom,
//     serialize.ValueFrom. They return (value, ok), except where the value itself says
//     that there is none: outside a handler, SettlerFrom's Settler fails its calls with
//     receiver.ErrNoSettler, and TxFrom's nil Tx is refused by whatever takes it.
//   - Whatever owns goroutines has Close(ctx), safe to call twice. Logging goes to an
//     optional *slog.Logger that discards by default, never to the SDK's log listener
//     (see Logging).
//
// # Logging
//
// Every component that can log takes an optional *slog.Logger: Logger in the options of
// sender, receiver (both processors), locks, dedupe, serialize.Handler,
// reqreply.Requester, pgdedupe.TxFilter and pgoutbox.Relay. Without one it logs nothing,
// as the SDK logs nothing until its logging is turned on. At Warn a processor logs failed
// receives, handler errors, failed settlements and renewals, and lost locks (from its lock
// engine); a sender, messages not sent; dedupe, store errors and lost leases; serialize,
// the messages it dead-letters. A hook that panics is logged at Error. Debug adds every
// settlement, lock renewal, send retry and skipped duplicate. Payloads are never logged.
//
//	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
//	s, err := sender.New(sdkSender, &sender.Options{Logger: logger})
//	p, err := receiver.New(sdkReceiver, handle, &receiver.Options{Logger: logger})
//
// The SDK's own AMQP logging is separate (AZURE_SDK_GO_LOGGING=all, or SetListener of
// github.com/Azure/azure-sdk-for-go/sdk/azcore/log); sbkit never touches it.
package sbkit
