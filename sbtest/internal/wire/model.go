package wire

import (
	"context"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// The server sees the entity model through these interfaces, and through nothing else
// of it: sbtest implements them with the adapters of its seam.go, over a Namespace and its
// senders and receivers. Errors come back as the model makes them (the SDK's
// *azservicebus.Error and go-amqp's *amqp.Error, and the sentinels of
// sbtest/internal/modelerr), and the server maps them to AMQP and HTTP (errors.go,
// httpdata.go). All methods are safe for concurrent use.

// Broker is a namespace: its entities, by path in any letter case where noted.
type Broker interface {
	// MaxMessageSize is the largest message the namespace stores, in bytes.
	MaxMessageSize() int
	// RoundTrip is the latency model's round trip.
	RoundTrip() time.Duration
	// ResolvePath returns the path under which the namespace keeps the queue, topic or
	// subscription path names in any letter case, or path when it names none.
	ResolvePath(path string) string
	// Exists reports whether path names a queue, topic or subscription.
	Exists(path string) bool
	// Deleted returns a context that ends when the queue, topic or subscription at path
	// is deleted, or nil when path names none.
	Deleted(path string) context.Context
	// Entity describes the queue or subscription at path.
	Entity(path string) (EntityInfo, bool)
	// NewSender returns a sender to the queue or topic at path.
	NewSender(path string) (Sender, error)
	// ReceiverAt returns a receiver of sub-queue sub of the queue or subscription at
	// path (any letter case), or CodeNotFound when there is none.
	ReceiverAt(path string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (Receiver, error)
	// NewReceiverForQueue and NewReceiverForSubscription are the client's calls.
	NewReceiverForQueue(queue string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (Receiver, error)
	NewReceiverForSubscription(topic, subscription string, mode azservicebus.ReceiveMode, sub azservicebus.SubQueue) (Receiver, error)
	// AcceptSession accepts session id of the queue or subscription at path, or the next
	// available one when id is nil (waiting until ctx ends).
	AcceptSession(ctx context.Context, path string, id *string, mode azservicebus.ReceiveMode) (SessionReceiver, error)
}

// EntityInfo describes a queue or subscription.
type EntityInfo struct {
	Name            string
	Topic           string // a subscription's topic; empty for a queue
	RequiresSession bool
}

// RawAMQP makes ReceivedMessage.RawAMQPMessage from the received Body, for a message
// a client sent over AMQP: the sections the Message cannot carry (nil for none).
type RawAMQP = func(body []byte) *azservicebus.AMQPAnnotatedMessage

// Sender sends to a queue or topic.
type Sender interface {
	// Prepare prepares msgs as one send request, applying the size limit; raws[i] are
	// msgs[i]'s raw AMQP sections (nil for none).
	Prepare(msgs []*azservicebus.Message, raws []RawAMQP) (Request, error)
	// StoreWait sleeps the latency model's wait for one send request, or less when ctx
	// ends first.
	StoreWait(ctx context.Context)
	// StoreMessages sends msgs as one request (a single message, a batch or a scheduled
	// set) with the size limit, faults and latency, and returns their sequence numbers.
	StoreMessages(ctx context.Context, msgs []*azservicebus.Message, raws []RawAMQP, batch bool) ([]int64, error)
	// Deleted returns a context that ends when the queue or topic is deleted.
	Deleted() context.Context

	SendMessage(ctx context.Context, m *azservicebus.Message, o *azservicebus.SendMessageOptions) error
	NewBatch(ctx context.Context, o *azservicebus.MessageBatchOptions) (sbkit.Batch, error)
	SendBatch(ctx context.Context, b sbkit.Batch, o *azservicebus.SendMessageBatchOptions) error
	CancelScheduledMessages(ctx context.Context, seqs []int64, o *azservicebus.CancelScheduledMessagesOptions) error
	Close(ctx context.Context) error
}

// Request is one send request that Prepare made.
type Request interface {
	// Enter counts the request in flight until leave is called.
	Enter() (leave func())
	// SendNow stores the request without the latency model's wait, and returns the
	// messages' sequence numbers.
	SendNow(ctx context.Context, batch bool) ([]int64, error)
}

// Receiver receives from a queue, a subscription or a sub-queue of either. The
// methods that take a lock token settle without the latency model's round trip.
type Receiver interface {
	// TryReceive takes up to max available messages without waiting and without latency;
	// nil when the receiver is closed.
	TryReceive(max int) []*azservicebus.ReceivedMessage
	// ReceiveNow waits until a message is available (or ctx ends) and takes up to max,
	// without the latency model's round trip.
	ReceiveNow(ctx context.Context, max int) ([]*azservicebus.ReceivedMessage, error)
	// HalfRoundTrip is half the latency model's round trip: the way of one frame.
	HalfRoundTrip() time.Duration
	// SettleWait sleeps the latency model's round trip for one settlement, or less when
	// ctx ends first.
	SettleWait(ctx context.Context)
	Complete(ctx context.Context, token [16]byte) error
	Abandon(ctx context.Context, token [16]byte, props map[string]any) error
	DeferLock(ctx context.Context, token [16]byte, props map[string]any) error
	DeadLetter(ctx context.Context, token [16]byte, o *azservicebus.DeadLetterOptions) error
	// ReleaseLock gives a message back without counting the delivery (the released
	// outcome); false when the receiver does not hold the lock.
	ReleaseLock(token [16]byte) bool
	// ForToken returns the receiver that renews or settles the lock with token through
	// $management.
	ForToken(token [16]byte) Receiver
	// PeekLock reports whether the receiver is in peek-lock mode.
	PeekLock() bool
	// Deleted returns a context that ends when the entity read is deleted.
	Deleted() context.Context
	// Peek and ReceiveDeferred answer at most limit bytes of messages.
	Peek(ctx context.Context, max int, o *azservicebus.PeekMessagesOptions, limit int) ([]*azservicebus.ReceivedMessage, error)
	ReceiveDeferred(ctx context.Context, seqs []int64, limit int) ([]*azservicebus.ReceivedMessage, error)

	ReceiveMessages(ctx context.Context, max int, o *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
	CompleteMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.CompleteMessageOptions) error
	AbandonMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.AbandonMessageOptions) error
	DeadLetterMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeadLetterOptions) error
	DeferMessage(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.DeferMessageOptions) error
	RenewMessageLock(ctx context.Context, m *azservicebus.ReceivedMessage, o *azservicebus.RenewMessageLockOptions) error
	Close(ctx context.Context) error
}

// SessionReceiver holds a session of a queue or subscription.
type SessionReceiver interface {
	// Receiver reads the session's messages.
	Receiver() Receiver
	SessionID() string
	LockedUntil() time.Time
	RenewSessionLock(ctx context.Context, o *azservicebus.RenewSessionLockOptions) error
	GetSessionState(ctx context.Context, o *azservicebus.GetSessionStateOptions) ([]byte, error)
	SetSessionState(ctx context.Context, state []byte, o *azservicebus.SetSessionStateOptions) error
	Close(ctx context.Context) error
}
