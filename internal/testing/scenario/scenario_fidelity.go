package scenario

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// missingEntity: send, schedule, receive and peek on a queue that does not exist fail
// with CodeNotFound (azure-sdk-for-go#24499: the service answers the $cbs put-token with
// 404, which the SDK reports as CodeNotFound).
func missingEntity(t *testing.T, b Backend) {
	q := b.MissingQueue(t)
	ctx := testContext(t)
	for _, op := range []struct {
		name string
		do   func(context.Context) error
	}{{"send", q.Send}, {"schedule", q.Schedule}, {"receive", q.Receive}, {"peek", q.Peek}} {
		err := op.do(ctx)
		var sbErr *azservicebus.Error
		if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound {
			t.Errorf("%s on a missing queue: %v, want CodeNotFound", op.name, err)
		}
	}
}

// locksSurviveClose: a closed receiver's locks are kept until LockedUntil ("Message
// transfers, locks, and settlement": when the client stops working, the message is
// available again only after the lock duration); another receiver renews and completes by
// lock token meanwhile (SDK live test TestReceiver_SettleWithOnlyLockToken); once a lock
// runs out the message is back with its DeliveryCount unchanged ("Messages, payloads, and
// serialization": a closed connection does not count).
func locksSurviveClose(t *testing.T, b Backend) {
	q, _ := shortLockQueue(t, b, QueueOptions{LockDuration: 5 * time.Second}) // long enough for the by-token calls on a loaded machine
	ctx := testContext(t)
	sendAll(t, q.NewSender(t), message("settled-by-token", "a"), message("expires", "b"))
	r1 := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	got := receiveN(t, r1, 2)
	if err := r1.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r2 := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	expectEmpty(t, q, r2) // both still locked
	var token [16]byte
	for _, m := range got {
		if m.MessageID == "settled-by-token" {
			token = m.LockToken
		}
	}
	byToken := &azservicebus.ReceivedMessage{LockToken: token}
	if err := r2.RenewMessageLock(ctx, byToken, nil); err != nil {
		t.Fatalf("renew by lock token after the receiver closed: %v", err)
	}
	if err := r2.CompleteMessage(ctx, byToken, nil); err != nil {
		t.Fatalf("complete by lock token after the receiver closed: %v", err)
	}
	back := receiveN(t, r2, 1)[0]
	if back.MessageID != "expires" || back.DeliveryCount != 1 {
		t.Errorf("after the lock ran out: %q with DeliveryCount %d, want %q with 1", back.MessageID, back.DeliveryCount, "expires")
	}
	completeAll(t, r2, []*azservicebus.ReceivedMessage{back})
	expectEmpty(t, q, r2)
}

// deliveryCount: DeliveryCount goes up on abandon, not on delivery ("Messages, payloads,
// and serialization"). A message dead-lettered on its first delivery shows 1 in the
// dead-letter queue (SDK live test TestMessageSettlementUsingReceiver: 2 after one
// abandon, still 2 in the dead-letter queue); receiving a deferred message by sequence
// number counts nothing, abandoning it does (SDK live test TestDeferredMessages/Abandon).
func deliveryCount(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	ctx := testContext(t)
	sendAll(t, q.NewSender(t), message("dead", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	m := receiveN(t, r, 1)[0]
	if m.DeliveryCount != 1 {
		t.Errorf("first delivery: DeliveryCount %d, want 1", m.DeliveryCount)
	}
	if err := r.DeadLetterMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	dlq := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true)
	d := receiveN(t, dlq, 1)[0]
	if d.DeliveryCount != 1 {
		t.Errorf("dead-lettered on its first delivery: DeliveryCount %d in the dead-letter queue, want 1", d.DeliveryCount)
	}
	completeAll(t, dlq, []*azservicebus.ReceivedMessage{d})

	sendAll(t, q.NewSender(t), message("deferred", "y"))
	m = receiveN(t, r, 1)[0]
	if err := r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	m = receiveN(t, r, 1)[0]
	if m.DeliveryCount != 2 {
		t.Errorf("after one abandon: DeliveryCount %d, want 2", m.DeliveryCount)
	}
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	ds, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ReceiveDeferredMessages: %d, %v", len(ds), err)
	}
	if ds[0].DeliveryCount != 2 {
		t.Errorf("deferred message received by sequence number: DeliveryCount %d, want 2 (unchanged)", ds[0].DeliveryCount)
	}
	if err := r.AbandonMessage(ctx, ds[0], nil); err != nil {
		t.Fatal(err)
	}
	peeked, err := r.(peeker).PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: m.SequenceNumber})
	if err != nil || len(peeked) != 1 {
		t.Fatalf("peek: %d, %v", len(peeked), err)
	}
	if peeked[0].DeliveryCount != 3 || peeked[0].State != azservicebus.MessageStateDeferred {
		t.Errorf("deferred message after an abandon: DeliveryCount %d, state %v; want 3, deferred", peeked[0].DeliveryCount, peeked[0].State)
	}
	ds, err = r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(ds) != 1 {
		t.Fatalf("ReceiveDeferredMessages again: %d, %v", len(ds), err)
	}
	completeAll(t, r, ds)
}

// peeker is what the SDK's and sbtest's receivers offer to peek.
type peeker interface {
	PeekMessages(ctx context.Context, maxMessageCount int, options *azservicebus.PeekMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
}

// deferredStrict: receiving deferred messages by sequence number is all or nothing: an
// unknown number fails the request (message not found, which the SDK reports as
// CodeNotFound) and locks nothing.
func deferredStrict(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	ctx := testContext(t)
	sendAll(t, q.NewSender(t), message("deferred", "x"))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	m := receiveN(t, r, 1)[0]
	if err := r.DeferMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	got, err := r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber, *m.SequenceNumber + 1000}, nil)
	var sbErr *azservicebus.Error
	if !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeNotFound || len(got) != 0 {
		t.Fatalf("with an unknown sequence number: %d messages, %v; want CodeNotFound", len(got), err)
	}
	got, err = r.ReceiveDeferredMessages(ctx, []int64{*m.SequenceNumber}, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("the deferred message alone: %d, %v", len(got), err)
	}
	completeAll(t, r, got)
}

// scheduler is what the SDK's and sbtest's senders offer to schedule.
type scheduler interface {
	ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, at time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error)
}

// scheduledSequence: ScheduleMessages returns the scheduled message's sequence number
// (peek shows it scheduled under it); when it becomes active it is appended to the queue
// as if enqueued then, with a new sequence number, after a message sent before that
// (Service Bus docs, message sequencing and timestamps: scheduled messages).
//
// What it asserts holds only when the peek and the other send finished before the
// scheduled time; on a machine so slow that they did not, the attempt proves nothing, and
// it is repeated with the message scheduled further ahead.
func scheduledSequence(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	s := q.NewSender(t)
	r := q.NewReceiver(t, azservicebus.ReceiveModeReceiveAndDelete, false)
	for _, ahead := range []time.Duration{2 * time.Second, 10 * time.Second, 40 * time.Second} {
		if scheduledSequenceBefore(t, s, r, ahead) {
			return
		}
		t.Logf("the peek and the send took more than %v: scheduling further ahead", ahead)
	}
	t.Fatal("the peek and the send never finished before the scheduled time")
}

// scheduledSequenceBefore runs scheduledSequence with the message scheduled ahead of
// now, and reports false (having received both messages) when the peek or the send
// finished after the scheduled time, which leaves what it asserts undecided.
func scheduledSequenceBefore(t *testing.T, s sbkit.BatchSender, r Receiver, ahead time.Duration) bool {
	ctx := testContext(t)
	at := time.Now().Add(ahead).Truncate(time.Millisecond)
	seqs, err := s.(scheduler).ScheduleMessages(ctx, []*azservicebus.Message{message("scheduled", "x")}, at, nil)
	if err != nil || len(seqs) != 1 {
		t.Fatalf("ScheduleMessages: %v, %v", seqs, err)
	}
	peeked, err := r.(peeker).PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seqs[0]})
	if err != nil {
		t.Fatalf("peek of the scheduled message: %v", err)
	}
	peekedBefore := time.Now().Before(at)
	sendAll(t, s, message("sent-before-activation", "y"))
	sentBefore := time.Now().Before(at)
	got := receiveN(t, r, 2)
	if !peekedBefore || !sentBefore {
		return false
	}
	if len(peeked) != 1 || *peeked[0].SequenceNumber != seqs[0] || peeked[0].State != azservicebus.MessageStateScheduled {
		t.Fatalf("peek of the scheduled message before its time: %d messages, want it, scheduled", len(peeked))
	}
	if got[0].MessageID != "sent-before-activation" || got[1].MessageID != "scheduled" {
		t.Fatalf("order %s, %s; want the message sent before the activation first", got[0].MessageID, got[1].MessageID)
	}
	if n := *got[1].SequenceNumber; n == seqs[0] || n <= *got[0].SequenceNumber {
		t.Errorf("activated message has sequence number %d (scheduled as %d, the earlier send has %d); want a new one after it", n, seqs[0], *got[0].SequenceNumber)
	}
	if got[1].ScheduledEnqueueTime == nil || !got[1].ScheduledEnqueueTime.Equal(at) {
		t.Errorf("ScheduledEnqueueTime %v, want %v", got[1].ScheduledEnqueueTime, at)
	}
	return true
}

// amqpSender is the SDK sender's raw AMQP send; sbtest's in-memory sender has none.
type amqpSender interface {
	SendAMQPAnnotatedMessage(ctx context.Context, message *azservicebus.AMQPAnnotatedMessage, options *azservicebus.SendAMQPAnnotatedMessageOptions) error
}

// rawAMQP: a value body, message and delivery annotations, footer and priority come back
// as sent (SDK live tests TestSender_SendAMQPMessageWithValue and siblings).
func rawAMQP(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	s, ok := q.NewSender(t).(amqpSender)
	if !ok {
		t.Skip("the backend's sender sends no raw AMQP messages")
	}
	ctx := testContext(t)
	err := s.SendAMQPAnnotatedMessage(ctx, &azservicebus.AMQPAnnotatedMessage{
		Body:                azservicebus.AMQPAnnotatedMessageBody{Value: "a value"},
		MessageAnnotations:  map[any]any{"custom-annotation": "kept"},
		DeliveryAnnotations: map[any]any{"custom-delivery": "kept"},
		Footer:              map[any]any{"custom-footer": "kept"},
		Header:              &azservicebus.AMQPAnnotatedMessageHeader{Priority: 7},
	}, nil)
	if err != nil {
		t.Fatalf("send a value body: %v", err)
	}
	got := receiveN(t, q.NewReceiver(t, azservicebus.ReceiveModeReceiveAndDelete, false), 1)[0]
	raw := got.RawAMQPMessage
	if raw == nil || raw.Body.Value != "a value" || raw.MessageAnnotations["custom-annotation"] != "kept" ||
		raw.Footer["custom-footer"] != "kept" || raw.Header == nil || raw.Header.Priority != 7 {
		t.Fatalf("received %+v, want the value body, annotation, footer and priority as sent", raw)
	}
}
