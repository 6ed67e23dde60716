// Package sbtest is an in-memory model of Azure Service Bus for tests and benchmarks,
// in the spirit of net/http/httptest and franz-go's kfake: a real broker with queues,
// topics and subscriptions, peek-lock, settlement, deferral, scheduling, time-to-live,
// duplicate detection, sessions, rules, auto-forwarding and dead-letter queues, plus
// fault injection, a latency model and inspection. It is not a stub that records calls.
//
// A Namespace plays the part of *azservicebus.Client. Its Sender satisfies
// sbkit.BatchSender and its Receiver sbkit.LockingReceiver, and both have the SDK
// types' other methods with the same signatures, so code written against interfaces of
// those methods runs unchanged against the SDK or against sbtest. NewServer serves a
// Namespace over AMQP 1.0, so that the unmodified SDKs of every language talk to it.
//
//	ns := sbtest.NewTestNamespace(t, &sbtest.NamespaceOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil}})
//	q, _ := ns.Entity("orders")
//	// ... run the code under test against ns.NewSender and ns.NewReceiverForQueue ...
//	if err := q.WaitDrained(ctx); err != nil { t.Fatal(err) }
//
// # Semantics
//
// The rules follow the service; the code names the source of each where it applies it:
//
//   - Sequence numbers are assigned on send, monotonic per queue or topic (a topic's
//     subscriptions share its numbers). A scheduled message is numbered when scheduled
//     and again when it becomes active, after the messages sent before that ("Message
//     sequencing and timestamps").
//   - DeliveryCount is 1 on the first delivery and goes up when a lock expires or a
//     message is abandoned ("Messages, payloads, and serialization"); after
//     MaxDeliveryCount counted deliveries the message moves to the dead-letter queue
//     with reason MaxDeliveryCountExceeded. Receiving a deferred message counts nothing.
//   - Locks outlive their receiver: after Receiver.Close or DropConnection the broker
//     keeps each lock until LockedUntil, any receiver of the entity renews or settles it
//     by lock token meanwhile, and then the message comes back with its DeliveryCount
//     unchanged ("Message transfers, locks, and settlement").
//   - ExpiresAt = EnqueuedTime + TTL, the TTL capped at the entity's default; a scheduled
//     message is enqueued at its scheduled time. Expired messages are never delivered
//     (dropped, or dead-lettered with sbkit.TTLExpiredReason); a locked message is not
//     expired while its lock holds ("Message expiration (Time to Live)").
//   - Settling or renewing a lock that is no longer held returns *azservicebus.Error with
//     CodeLockLost.
//   - Sessions (EntityOptions.RequiresSession): messages need a SessionID, plain
//     receivers are refused, and AcceptSession*/AcceptNextSession* return a
//     SessionReceiver that holds one session's lock and state.
//   - Subscriptions route by rules (true, false, correlation and SQL filters, SQL
//     actions; Entity.CreateRule, EntityOptions.DefaultRule); evaluating one message
//     costs at most 1,048,576 steps and an action may give it at most 64 KiB of
//     properties, past which the message is dead-lettered with RuleEvaluationFailedReason.
//   - Auto-forwarding (EntityOptions.ForwardTo, ForwardDeadLetteredMessagesTo) follows at
//     most MaxForwardHops hops and makes at most NamespaceOptions.MaxForwardCopies copies
//     of one sent message. Entities can be deleted, listed, reconfigured and disabled
//     (Entity.SetStatus); the clients of a deleted entity fail with CodeNotFound.
//
// Operations are cheap (heaps, no scans on the hot path) and sleep the namespace's
// Latency without holding a lock, so sbtest measures throughput too.
//
// # Faults, latency and inspection
//
// Entity.InjectFault fails the next operations of a kind (sends, receives, settlements,
// renewals) with a transient or a permanent error, or hangs them until their context
// ends; with Fault.After the operation takes effect at the broker and fails at the
// client, as a lost reply does: Fault{Op: OpComplete, Count: 1, After: true} makes the
// next Complete succeed and report an error. Entity.ExpireLock loses one message's lock,
// Entity.ExpireSessionLock a session's, and Receiver.DropConnection cuts a receiver's
// link while the broker keeps its locks, as the service does. [Latency] (RoundTrip,
// StoreTime, StoreConcurrency) reproduces the service's timing at any scale, for
// benchmarks. Active, Locked, Deferred, Scheduled, DeadLetters, Counts (one snapshot),
// Sessions and Stats inspect an entity; WaitUntil and WaitDrained wait for what a test
// expects, and [Eventually] polls a condition nothing waits on. NewTestNamespace and NewTestServer fail the test on bad options and clean up
// after it.
//
// # Time and testing/synctest
//
// Time is read with time.Now and waited for with timers and channels only, and no
// goroutine outlives a call, so sbtest runs inside testing/synctest bubbles: a
// five-minute lock expiry takes no real time. Lock expiry, TTL expiry and scheduled
// enqueue are applied at every operation and inspection. Create the Namespace inside the
// bubble that uses it: its channels and timers belong to that bubble. Entity.WaitUntil
// and WaitDrained wait for the counts a test expects, instead of polling.
//
// # Differences from Service Bus
//
// Not modelled: partitioned entities, quotas (MaxSizeInMegabytes), the premium tier's
// large messages, AutoDeleteOnIdle, transactions, the transfer dead-letter queue (always
// empty), TimeAfterFirstMessage (ReceiveMessages returns what is available at once),
// refusing a receiver on an auto-forwarding entity, and clock skew. What a test could
// still tell apart:
//
//   - A message sent over AMQP keeps its value or sequence body, data sections,
//     annotations, footer and priority, but a value or sequence body counts 0 bytes
//     against MaxMessageSize; the in-memory Sender cannot send one. A message-id or
//     correlation-id that is not a string comes back over the wire with its type (AMQP
//     1.0 part 3.2 keeps the bare message); the in-memory model keeps its string form.
//   - Settling a message received on a link that DropConnection cut returns CodeLockLost;
//     the SDK reports the connection error instead.
//   - A lock that expires after its receiver closed returns the message with
//     DeliveryCount unchanged; no SDK live test pins the service's count there.
//   - A message dead-lettered for MaxDeliveryCountExceeded shows DeliveryCount equal to
//     MaxDeliveryCount.
//   - Receiving an expired deferred message by sequence number expires it and fails the
//     request with CodeNotFound; the documentation does not say what the reply is.
//   - Expiry is exact: an expired message is gone at ExpiresAt, from peek and the counts
//     too, where the broker may expire lazily ("Message expiration (Time to Live)").
//   - Sequence numbers have gaps: a scheduled message's first number and cancelled ones
//     are not reused.
//   - An entity made in the model with duplicate detection off reports the default
//     window, PT10M, over the admin API whatever window its configuration named.
//   - ForwardTargetUnavailableReason, ForwardCopiesExceededReason and
//     RuleEvaluationFailedReason are sbtest's own texts; the service documents the
//     dead-lettering, not the text. DeadLetteringOnFilterEvaluationExceptions is always
//     on, the service's default.
//
// # On the wire
//
// NewServer (NewTestServer in a test) serves a Namespace over AMQP 1.0 on a TCP port,
// as httptest.Server serves HTTP: hand Server.ConnectionString (with
// UseDevelopmentEmulator=true) to the unmodified SDK. No Docker, no SQL, no account. The
// entities, faults, latency and inspection are the Namespace's.
//
// The wire emulates SASL ANONYMOUS (any token is accepted unless ServerOptions.SASKeys
// names keys, when tokens are checked as the service checks them; the $cbs put-token
// exchange answers 404 for an entity that does not exist, as the service does), connections,
// sessions, links, multi-frame transfers and flow control; sending messages and batches;
// receiving in peek-lock and receive-and-delete modes from queues, subscriptions and
// their dead-letter queues; settlement by disposition, with lock tokens as delivery tags
// and x-opt-lock-token annotations; the $management operations renew-lock,
// peek-message, schedule-message, cancel-scheduled-message, receive-by-sequence-number,
// update-disposition, renew-session-lock, get-session-state and set-session-state; and
// Service Bus sessions (a receive link with the session filter, waiting for the next
// session up to the link's com.microsoft:timeout). Link addresses may be entity paths
// or URIs, in any letter case. Deleting an entity detaches its links with
// amqp:not-found.
//
// The same port serves AMQP over TLS and the administration API over HTTPS with a
// self-signed certificate (Server.CertificatePEM), so SDKs without emulator support
// connect too. The administration API is the ATOM/XML REST API of the SDKs' admin
// clients (Server.AdminClientOptions): queues, topics, subscriptions, rules and runtime
// properties; GET /health answers 200. ServerOptions.AdminHTTPAddr serves both in plain
// HTTP on a second port, as Microsoft's emulator serves them on port 5300, and the
// explorer page at / of that port.
//
// Every port that serves HTTP also carries AMQP over WebSockets at
// /$servicebus/websocket (with or without the trailing slash; subprotocol AMQPWSB10 or
// amqp), which the SDKs use with their WebSocket transport (the Go SDK's
// ClientOptions.NewWebSocketConn; Server.WebSocketClientOptions sets it up): wss:// on
// the AMQP port, ws:// on AdminHTTPAddr. The tunnel is served as a TCP connection is,
// under the same limits and the same $cbs authorization. The same ports serve the
// runtime REST API's message calls ("Service Bus runtime REST API"): Send Message and
// Send Message Batch, Peek-Lock Message, Receive and Delete Message, Unlock Message,
// Delete Message and Renew-Lock for a Message, on queues and subscriptions, over the same
// entities, locks and delivery counts as AMQP, with the administration API's
// Authorization check. Custom property names sent as headers arrive in Go's canonical
// form ("Orderid" for "orderId"); the message reference of a lock URL is not checked (the
// lock token names the message); a receive waits at most half of WriteTimeout.
//
// Not emulated: authorization beyond shared access signatures
// (no rights per key, no Microsoft Entra tokens), the AMQP rule operations (use the
// administration API or the model), transactions, and the other $management operations
// (status 501). A message without a time-to-live goes without a header ttl, as the
// service sends it, so the SDK reports TimeToLive 0 for it.
//
// Frames on one session take effect in the order they arrived, while the latency
// model's waits of pipelined sends and settlements overlap: a transfer is stored (or
// refused) before a later detach or close, and sequence numbers follow arrival order
// ("Message sequencing and timestamps"). Faults reach the client as the service would
// send them: CodeLockLost as com.microsoft:message-lock-lost, TransientError as
// com.microsoft:timeout, which the SDK retries by itself before it reports CodeTimeout
// (so test settlement failures with CodeLockLost faults), a Hang fault until the link
// closes. Every cost a client can cause is bounded and documented on ServerOptions
// (connections, handshakes, sessions, links, unread frames, $management answers,
// administration state); hostile input closes the offending connection only.
package sbtest

// How the code is laid out, for contributors. The model is the files of this package
// (namespace.go, entity.go, receiver.go, msgsession.go for Service Bus sessions, ...).
// The AMQP and HTTP server is package internal/wire, which cannot import sbtest: it sees
// the model only through the interfaces it declares (internal/wire/model.go), which the
// adapters of seam.go implement over a Namespace, so the compiler keeps the seam. Of
// the model's files only server.go (NewServer: ServerOptions to wire.Options, the
// Server's methods) and seam.go import it (seam_test.go). The errors the server tells
// apart live in internal/modelerr, which both import. The administration API
// (internal/admin) and the explorer (internal/explorer) define the Model they need the
// same way, and seam_admin.go and seam_explorer.go adapt a Namespace to them with
// exported methods only. The languages live in internal packages with their own tests
// and fuzzers: internal/amqp (the AMQP 1.0 codec), internal/atom (the administration
// API's documents), internal/sqlfilter (rules). The server's tests are mostly here
// (wire_*_test.go), since they drive it with the SDK and look at the model; they see
// what the server holds through the few methods of internal/wire/inspect.go.
