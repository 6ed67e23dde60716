// Package sbtest is an in-memory model of Azure Service Bus for tests and benchmarks,
// in the spirit of net/http/httptest and franz-go's kfake: a real broker with queues,
// topics and subscriptions, peek-lock, settlement, deferral, scheduling, time-to-live,
// duplicate detection and dead-letter queues, plus fault injection, a latency model and
// inspection. It is not a stub that records calls.
//
// A Namespace plays the part of *azservicebus.Client. Its Sender satisfies
// sbkit.BatchSender and its Receiver satisfies sbkit.LockingReceiver, and both have the
// SDK types' other methods with the same signatures, so code written against interfaces
// of those methods runs unchanged against the SDK or against sbtest.
//
// The rules follow the service (see the seeds in the design documents):
//
//   - Sequence numbers are assigned on send, monotonic per queue or topic (a topic's
//     subscriptions share its numbers). A scheduled message is numbered when scheduled
//     (ScheduleMessages returns that number, CancelScheduledMessages takes it while the
//     message waits) and again when it becomes active: it is appended after the messages
//     sent before that, as the service documents.
//   - DeliveryCount is 1 on the first delivery and goes up when a lock expires or a
//     message is abandoned, not on delivery (seed 004): a message dead-lettered on its
//     first delivery shows 1 in the dead-letter queue, and receiving a deferred message
//     by sequence number counts nothing. After MaxDeliveryCount counted deliveries the
//     message moves to the dead-letter queue with reason MaxDeliveryCountExceeded; the
//     dead-letter queue counts none.
//   - Locks outlive their receiver: after Receiver.Close or Receiver.DropConnection the
//     broker keeps each lock until LockedUntil (seed 000), any receiver of the entity
//     renews or settles it by lock token meanwhile, and when it expires the message
//     comes back with its DeliveryCount unchanged (seed 004: a closed connection does
//     not count).
//   - ExpiresAt = EnqueuedTime + TTL, TTL capped at the entity's default; a scheduled
//     message is enqueued at its scheduled time. Expired messages are never delivered
//     (dropped, or dead-lettered with sbkit.TTLExpiredReason); a locked message is not
//     affected by expiry while its lock holds.
//   - Settling or renewing a lock that is no longer held returns *azservicebus.Error
//     with CodeLockLost.
//
// Time is read with time.Now and waited for with timers and channels only, and no
// goroutine outlives a call, so sbtest runs inside testing/synctest bubbles: a five-minute
// lock expiry takes no real time. Lock expiry, TTL expiry and scheduled enqueue are
// applied lazily at every operation; a blocked ReceiveMessages wakes on a channel when a
// message becomes available and on a timer at the next lock expiry or scheduled time.
//
// Create the Namespace inside the bubble that uses it: its channels and timers belong to
// the bubble that made them.
//
// Sessions: a queue or subscription with EntityOptions.RequiresSession refuses messages
// without SessionID and plain receivers (amqp:not-allowed, as the SDK reports it);
// Namespace.AcceptSessionForQueue and AcceptNextSessionForQueue (and the subscription
// forms) return a SessionReceiver that holds one session's lock, receives its messages in
// order, renews the lock and keeps the session state. Entity.Sessions inspects them.
//
// Subscriptions have rules (Entity.CreateRule and friends, with the SDK's admin types):
// true, false, correlation and SQL filters, and SQL actions; a message goes to a
// subscription when any rule matches, once for the rules without actions plus once per
// matching rule with an action (see rule.go for the sources). Evaluating one message
// against a subscription's rules costs at most 1,048,576 steps, and an action gives it at
// most 64 KiB of properties; past either the subscription dead-letters it with
// RuleEvaluationFailedReason.
//
// Auto-forwarding: EntityOptions.ForwardTo and ForwardDeadLetteredMessagesTo, with
// DeadLetterSource and EnqueuedSequenceNumber set and at most MaxForwardHops hops; a
// message whose target is deleted or disabled stays in the source's dead-letter queue
// (ForwardTargetUnavailableReason), and one sent message makes at most
// NamespaceOptions.MaxForwardCopies copies (forward.go). Entities can be deleted, listed
// and reconfigured (manage.go); the Senders and Receivers of a deleted entity fail with
// CodeNotFound.
//
// Entity status (Entity.SetStatus, Topic.SetStatus): Disabled, SendDisabled and
// ReceiveDisabled refuse what they say with com.microsoft:entity-disabled (status.go).
//
// Not modelled: AutoDeleteOnIdle, refusing a receiver on an auto-forwarding entity (the
// service does; sbtest's stays empty), transactions, the transfer dead-letter queue
// (always empty), and
// TimeAfterFirstMessage (ReceiveMessages returns what is available at once).
//
// # Differences from Service Bus
//
// What a test could still tell apart (issue 15 settled the rest; each rule above names
// its source: a seed, an SDK live test or the service documentation):
//
//   - Raw AMQP: a message sent over the wire keeps its value or sequence body, data
//     sections, annotations, footer and priority; but a value or sequence body counts 0
//     bytes against MaxMessageSize, and the in-memory Sender cannot send one.
//   - Settling a message received on a link that DropConnection cut returns CodeLockLost;
//     the SDK reports the connection error instead (its settlement goes to the dead link).
//   - A lock that expires after its receiver closed or its connection dropped returns the
//     message with DeliveryCount unchanged (seed 004 says a closed connection does not
//     count); the service's exact count here is not pinned by a live test.
//   - A message dead-lettered for MaxDeliveryCountExceeded shows DeliveryCount equal to
//     MaxDeliveryCount.
//   - Receiving an expired deferred message by sequence number expires it (dead-letter or
//     drop, per the entity, as documented) and fails the request with CodeNotFound; the
//     documentation does not say what the reply is.
//   - Expiry is exact: an expired message is gone at ExpiresAt, also from peek and the
//     counts, where the broker may expire lazily (seed 003).
//   - Sequence numbers: a scheduled message's first number is not reused after it becomes
//     active, and cancelled ones are not either, so numbers have gaps there.
//   - Partitioned entities, quotas (MaxSizeInMegabytes), the premium tier's large messages
//     and AutoDeleteOnIdle are not modelled; time is the local clock, with no skew.
//   - Over the wire, a message-id or correlation-id that is not a string (a uuid, a ulong,
//     a binary) comes back with the type it was sent with, as AMQP keeps the bare message
//     (AMQP 1.0 part 3.2); the service documents MessageId only as a string, and the
//     in-memory model keeps its string form.
//   - An entity made in the model with duplicate detection off (NewQueue without a
//     DuplicateDetectionWindow, or sbemulator's Config.json) reports the default window,
//     PT10M, over the admin API whatever window its configuration named: the model keeps
//     a window only while detection is on.
//   - The dead-letter reasons ForwardTargetUnavailableReason, ForwardCopiesExceededReason
//     and RuleEvaluationFailedReason are sbtest's own: the service documents the
//     dead-lettering, not the text. DeadLetteringOnFilterEvaluationExceptions is always
//     on (the service's default); the bounds on rule evaluation and forwarding copies are
//     sbtest's (the service bounds a filter's text, not its work, and a chain's depth,
//     not its breadth).
//
// Operations are cheap (heaps keyed by sequence number and by deadline, no scans on the
// hot path) and each sleeps the namespace's Latency without holding any lock, so
// concurrent senders and receivers are served in parallel, which makes sbtest usable for
// throughput benchmarks.
//
// # On the wire
//
// NewServer serves a Namespace over AMQP 1.0 on a loopback TCP port, so that the
// unmodified azservicebus client runs against sbtest: hand it Server.ConnectionString
// (UseDevelopmentEmulator=true). No Docker, no SQL, no network beyond 127.0.0.1. The
// same port serves AMQP over TLS and the administration API over HTTPS with a
// self-signed certificate (Server.CertificatePEM), so the SDKs of other languages,
// including releases without emulator support, connect too. The entities, faults,
// latency and inspection are the Namespace's; what the wire does and does not emulate is
// listed on Server.
//
// A Server bounds what a client can make it hold (ServerOptions, see Server for the
// whole list): by default 64 connections (AMQP and administration alike), 256 sessions
// per connection and 32 links per session, each refused beyond with
// amqp:resource-limit-exceeded (which the SDK reports without retrying); 64 connections
// in their handshake, for 10 s each, apart from those; about 1 MiB of unread frames per
// connection, after which it stops reading from that client and closes the connection
// after WriteTimeout (30 s).
//
//	srv, _ := sbtest.NewServer(&sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
//	defer srv.Close(context.Background())
//	client, _ := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
package sbtest
