// Package sbtest is an in-memory model of Azure Service Bus for tests and benchmarks,
// in the spirit of net/http/httptest and franz-go's kfake: a real broker with queues,
// topics and subscriptions, peek-lock, settlement, deferral, scheduling, time-to-live,
// duplicate detection and dead-letter queues, plus fault injection, a latency model and
// inspection. It is not a stub that records calls.
//
// A Namespace plays the part of *azservicebus.Client. Its Sender satisfies
// sbkit.BatchSender and its Receiver satisfies sbkit.LockingReceiver,
// sbkit.DeferredReceiver and sbkit.MessagePeeker, so code written against those
// interfaces runs unchanged against the SDK or against sbtest.
//
// The rules follow the service (see the seeds in the design documents):
//
//   - Sequence numbers are assigned on send, monotonic and gapless per queue or topic
//     (a topic's subscriptions share its numbers).
//   - DeliveryCount is 1 on the first delivery. Abandon or lock expiry counts a delivery;
//     a dropped connection (Receiver.DropConnection, Receiver.Close) does not. After
//     MaxDeliveryCount counted deliveries the message moves to the dead-letter queue with
//     reason MaxDeliveryCountExceeded.
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
// Not modelled: sessions (SessionID is carried but not enforced), subscription rules and
// filters (every subscription gets every message), auto-forwarding (DeadLetterSource is
// never set), transactions, the transfer dead-letter queue (always empty), and
// TimeAfterFirstMessage (ReceiveMessages returns what is available at once).
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
// entities, faults, latency and inspection are the Namespace's; what the wire does and
// does not emulate is listed on Server.
//
//	srv, _ := sbtest.NewServer(&sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
//	defer srv.Close()
//	client, _ := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
package sbtest
