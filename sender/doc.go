// Package sender is a bounded, pipelined, auto-batching sender for Azure Service Bus.
//
// A [Sender] wraps an [*azservicebus.Sender] (or the sender of package sbtest, or any
// [sbkit.MessageSender]) and settles every send explicitly, as the Service Bus
// documentation asks: each message's outcome, accepted or an error, reaches the caller
// exactly once, through the return value of [Sender.Send], the [*Result] of
// [Sender.SendAsync] and [Sender.TrySend], the error of [Sender.SendAll], and the
// [SendResultHook]s when there are any. There is no fire-and-forget path.
//
// Pipelining. Many sends are in flight at once, so that N messages cost about one round
// trip instead of N. The number of messages and the number of bytes in flight
// ([sbkit.MessageSize]) are bounded by two windows ([golang.org/x/sync/semaphore]), so
// memory stays bounded however fast the caller produces: when a window is full, Send
// and SendAsync block until room frees or their context ends, and TrySend returns
// [ErrFull] at once. A message counts against the windows from the moment it is accepted
// until its outcome is known. A message larger than the whole byte window is not an
// error and cannot deadlock: it takes the whole byte window, so it waits until nothing
// else is in flight and then travels alone.
//
// Batching. Unless [Options.DisableBatching] is set, messages sent close together travel
// in one batch, one round trip, when the destination is an [*azservicebus.Sender] (New
// adapts it with [sbkit.NewBatchSender]) or implements [sbkit.BatchSender] (sbtest's
// sender does). A batch is sealed when it reaches [Options.MaxBatchMessages] or
// [Options.MaxBatchBytes], or [Options.Linger] (default 2ms) after its first message
// arrived, or at once at [Sender.Flush] and [Sender.Close]. Several batches are in flight
// at once. Messages are grouped by SessionID (or PartitionKey when there is no
// SessionID), since Service Bus requires one batch to carry one session or partition
// key. A message that does not fit in the SDK batch starts the next batch; a message too
// large on its own fails alone with [azservicebus.ErrMessageTooLarge]; a failed batch
// reports its error to each of its messages, after retrying the whole batch when the
// error is transient.
//
// Retries. Before the first attempt a message without a MessageID gets a random one
// ([sbkit.EnsureMessageID]), so a retried message is recognisable as a duplicate by the
// broker's duplicate detection and by consumers. Transient errors ([sbkit.IsTransient])
// are retried with an exponential, jittered backoff, as [Options.Retry] says (default 5
// retries from 100ms, doubling up to 10s) and for no longer than the message's context
// and [Sender.Close] allow; other errors fail at once. Every failure is a [*SendError]
// naming the message, the number of attempts and the cause.
//
// Ordering. Completions may arrive out of order. With [Options.Ordered], messages that
// share a SessionID (or a PartitionKey when there is no SessionID) are never reordered:
// at most one request per key is in flight, and a retried request is retried before the
// next one of its key goes; the messages of a key that waited meanwhile go together, as
// many per request as a batch holds. A message that fails for good does not hold back the later
// messages of its key. Messages with neither key are not ordered, unless
// [Options.OrderKey] gives them one: it refines the key, so that messages share a batch
// and an order only when their SessionID (or PartitionKey) and their OrderKey agree.
//
// Contexts. The context given to Send, SendAsync, TrySend and SendAll is passed to the
// hooks and bounds waiting for room in the windows, waiting in a linger batch or behind
// an earlier message of the same key (a message whose context has ended by then is not
// sent; its outcome is the context's error), and retries. A message sent on its own
// (batching off) is sent with that context, so cancelling it aborts the request or the
// backoff. A message that is already on the wire inside a batch shared with other
// messages is not aborted by its own context (that would fail the others); its outcome is
// the batch's, except that a batch about to be retried leaves out the messages whose
// context has ended, and its backoff ends when the contexts of all its messages have
// (their outcome is then the context's error, wrapping the last attempt's error).
//
// Observation. [Options.Hooks] see each message before it is accepted, on the caller's
// goroutine with the caller's context ([SendStartHook], where an OpenTelemetry adapter
// starts the message's span, injects its trace context and returns the context the
// message is sent with), each outcome with its attempts and duration
// ([SendResultHook], or the [SendResultHookFunc] adapter), each retry ([SendRetryHook]) and
// each batch request ([SendBatchHook]). [Sender.Stats] counts the same.
//
// Scheduled messages and TTL. A message whose ScheduledEnqueueTime is set
// ([sbkit.SetSchedule], or [Sender.Schedule]) is sent like any other, through
// SendMessage or a batch: the broker keeps it until that time. The sender does not call
// ScheduleMessages, so it returns no sequence numbers; call the SDK sender's
// ScheduleMessages directly when you need them to cancel a scheduled message.
// [Options.DefaultTTL] sets a TimeToLive ([sbkit.SetTTL]) on messages that carry none.
//
// Messages are owned by the Sender from the moment they are accepted until their outcome
// is known: do not modify them meanwhile. A Sender is safe for concurrent use.
package sender
