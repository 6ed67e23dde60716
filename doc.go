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
//
// Nothing in this package starts goroutines; every function is safe for concurrent use.
package sbkit
