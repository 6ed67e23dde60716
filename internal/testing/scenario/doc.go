// Package scenario is one suite of end-to-end scenarios for the sbkit toolkit (sender,
// processor with lock renewal, dedupe, serialize) that runs unchanged against any
// Service Bus: the in-memory broker of package sbtest, the real azservicebus client
// talking to sbtest.NewServer over AMQP, and a real namespace.
//
// A Backend gives each scenario a Queue: a fresh one with the asked-for lock duration and
// max delivery count where the backend can create queues, or a drained existing one where
// it cannot (a real namespace). Scenarios use only what every backend can give: a
// sbkit.BatchSender, peek-lock or receive-and-delete receivers of the queue and of its
// dead-letter sub-queue, and the queue's properties. They count messages by receiving
// them, never by inspecting the broker, so that the same assertions hold against the
// real service.
//
// Run runs every scenario as a subtest of t. The package is for tests only: its functions
// take a *testing.T and fail it.
package scenario
