// Package deadletter inspects, exports, imports, re-drives and purges the messages of a
// Service Bus dead-letter queue. It is what the sbctl command runs.
//
// The dead-letter queue is the broker's: messages land there when a receiver
// dead-letters them, when their delivery count passes MaxDeliveryCount, or when they
// expire on an entity that dead-letters expired messages ("Overview of Service Bus
// dead-letter queues", learn.microsoft.com/azure/service-bus-messaging/service-bus-dead-letter-queues).
// The queue is a sub-queue of its entity and is read like any receiver, with
// [azservicebus.SubQueueDeadLetter]; nothing can be sent to it. The functions of this
// package take the receiver and sender you made, through narrow interfaces that the
// SDK's types and package sbtest's satisfy, and own nothing once they return.
//
// Inspection. [Summarize] and [List] read the queue with PeekMessages only: no lock is
// taken and DeliveryCount does not change (peeking is "Message browsing" in
// "Message transfers, locks, and settlement").
//
// Re-drive. [Redrive] receives in peek-lock mode, sends a copy of each message that
// matches the [Filter] through a [sender.Sender] (pipelined and batched), and completes
// the dead-lettered original only after the broker accepted the copy. A copy whose send
// fails leaves its original in the dead-letter queue (abandoned); a complete that fails
// after the copy was accepted leaves both, which the [Stats] say
// ([Stats.CompleteFailed]): the copy keeps the original's MessageID, so the destination's
// duplicate detection drops a second copy of it, and without duplicate detection the
// destination receives it twice. A subscription's dead letters reach that subscription
// only when the topic's rules are set for it: see [SubscriptionFilter].
//
// Export and import. [Export] writes each message as one JSON object per line
// ([Record]), by peek (the queue does not change) or by receive-and-complete (each
// message is completed only after its line was written); [Import] sends records back
// through a [sender.Sender]. Body bytes, the AMQP value and sequence body kinds, and the
// types of application properties (integers of each width, floats, times, UUIDs, binary)
// round-trip.
//
// Purge. [Purge] deletes dead letters: in receive-and-delete batches without a filter,
// or in peek-lock with a filter, completing only the messages that match; deferred
// messages by their sequence numbers.
//
// Counts reconcile: every operation reports [Stats] in which Moved + Skipped + Failed =
// Seen. When ctx ends, an operation stops taking new messages, finishes the sends and
// settlements it started (for at most [RedriveOptions.ShutdownTimeout]) and reports what
// it moved, with ctx's error.
//
// The functions are safe to call from many goroutines, each with its own receiver: a
// receiver must not be shared by two calls at once (the SDK forbids concurrent
// ReceiveMessages).
package deadletter
