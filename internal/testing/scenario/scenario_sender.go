package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit/sender"
)

// senderMessages is how many messages the sender scenarios send.
const senderMessages = 40

// senderMessage returns the i-th message of a sender scenario: every third one carries
// its own MessageID, the others leave it to the sender.
func senderMessage(i int) *azservicebus.Message {
	ct, subject, corr := "text/plain; charset=utf-8", fmt.Sprintf("subject-%d", i), fmt.Sprintf("corr-%d", i)
	ttl := time.Hour
	m := &azservicebus.Message{
		Body:          fmt.Appendf(nil, "body %d", i),
		ContentType:   &ct,
		Subject:       &subject,
		CorrelationID: &corr,
		TimeToLive:    &ttl,
		ApplicationProperties: map[string]any{
			"i":    int64(i),
			"kind": "scenario",
			"odd":  i%2 == 1,
		},
	}
	if i%3 == 0 {
		id := fmt.Sprintf("caller-id-%d", i)
		m.MessageID = &id
	}
	return m
}

// checkSenderMessage compares a received message with what senderMessage(i) sent under
// the MessageID id.
func checkSenderMessage(t *testing.T, got *azservicebus.ReceivedMessage, i int, id string) {
	t.Helper()
	want := senderMessage(i)
	if got.MessageID != id {
		t.Errorf("message %d: MessageID %q, want %q", i, got.MessageID, id)
	}
	if string(got.Body) != string(want.Body) {
		t.Errorf("message %d: body %q, want %q", i, got.Body, want.Body)
	}
	for _, p := range []struct {
		name      string
		got, want *string
	}{
		{"ContentType", got.ContentType, want.ContentType},
		{"Subject", got.Subject, want.Subject},
		{"CorrelationID", got.CorrelationID, want.CorrelationID},
	} {
		if p.got == nil || *p.got != *p.want {
			t.Errorf("message %d: %s %v, want %q", i, p.name, deref(p.got), *p.want)
		}
	}
	if got.TimeToLive == nil || *got.TimeToLive != *want.TimeToLive {
		t.Errorf("message %d: TimeToLive %v, want %v", i, deref(got.TimeToLive), *want.TimeToLive)
	}
	for k, v := range want.ApplicationProperties {
		if got.ApplicationProperties[k] != v {
			t.Errorf("message %d: property %q = %#v (%T), want %#v (%T)", i, k, got.ApplicationProperties[k], got.ApplicationProperties[k], v, v)
		}
	}
	if got.DeliveryCount != 1 {
		t.Errorf("message %d: DeliveryCount %d, want 1", i, got.DeliveryCount)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// senderDelivers sends senderMessages messages through [sender.New], pipelined one per
// request or batched, and checks that each arrives exactly once, intact, with the
// MessageID the sender reported.
func senderDelivers(batched bool) func(t *testing.T, b Backend) {
	return func(t *testing.T, b Backend) {
		q := b.Queue(t, QueueOptions{})
		dst := q.NewSender(t)
		hook := &batchCounter{}
		s, err := sender.New(dst, &sender.Options{
			DisableBatching:     !batched,
			MaxInFlightMessages: 16,
			Linger:              5 * time.Millisecond,
			Hooks:               []sender.Hook{hook},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := testContext(t)
		results := make([]*sender.Result, senderMessages)
		for i := range results {
			if results[i], err = s.SendAsync(ctx, senderMessage(i)); err != nil {
				t.Fatalf("SendAsync %d: %v", i, err)
			}
		}
		if err := s.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
		byID := map[string]int{}
		for i, r := range results {
			if err := r.Err(); err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			id := r.MessageID()
			if id == "" {
				t.Fatalf("message %d: no MessageID set", i)
			}
			if i%3 == 0 && id != fmt.Sprintf("caller-id-%d", i) {
				t.Errorf("message %d: the sender replaced the caller's MessageID with %q", i, id)
			}
			if _, dup := byID[id]; dup {
				t.Fatalf("MessageID %q given twice", id)
			}
			byID[id] = i
		}
		st := s.Stats()
		if st.Sent != senderMessages || st.Failed != 0 {
			t.Errorf("sender stats: %d sent, %d failed; want %d, 0", st.Sent, st.Failed, senderMessages)
		}
		if batches := hook.count(); batched && (batches == 0 || batches >= senderMessages) {
			t.Errorf("%d batch requests for %d messages: not batched", batches, senderMessages)
		} else if !batched && batches != 0 {
			t.Errorf("%d batch requests with batching off", batches)
		}

		r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
		got := receiveN(t, r, senderMessages)
		seen := map[string]bool{}
		for _, m := range got {
			i, ok := byID[m.MessageID]
			if !ok {
				t.Errorf("received unknown MessageID %q", m.MessageID)
				continue
			}
			if seen[m.MessageID] {
				t.Errorf("message %d (%s) received twice", i, m.MessageID)
			}
			seen[m.MessageID] = true
			checkSenderMessage(t, m, i, m.MessageID)
		}
		completeAll(t, r, got)
		expectEmpty(t, q, r)
	}
}

// batchCounter counts the sender's successful batch requests.
type batchCounter struct {
	mu sync.Mutex
	n  int
}

func (c *batchCounter) OnSendBatch(_ context.Context, e sender.SendBatch) {
	if e.Err == nil {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
}

var _ sender.SendBatchHook = (*batchCounter)(nil)

func (c *batchCounter) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// senderTooLarge sends a message larger than the broker accepts between two small ones:
// it alone fails, with [azservicebus.ErrMessageTooLarge], and the others arrive.
func senderTooLarge(batched bool) func(t *testing.T, b Backend) {
	return func(t *testing.T, b Backend) {
		q := b.Queue(t, QueueOptions{})
		s, err := sender.New(q.NewSender(t), &sender.Options{DisableBatching: !batched})
		if err != nil {
			t.Fatal(err)
		}
		ctx := testContext(t)
		huge := make([]byte, q.Properties().MaxMessageSize+1024)
		msgs := []*azservicebus.Message{message("small-1", "a"), {Body: huge}, message("small-2", "b")}
		err = s.SendAll(ctx, msgs)
		var all *sender.SendAllError
		if !errors.As(err, &all) {
			t.Fatalf("SendAll: %v, want a *sender.SendAllError", err)
		}
		if f := all.Failed(); len(f) != 1 || f[0] != 1 {
			t.Fatalf("failed messages %v, want [1]: %v", f, err)
		}
		if !errors.Is(all.Errs[1], azservicebus.ErrMessageTooLarge) {
			t.Errorf("too large message: %v, want ErrMessageTooLarge", all.Errs[1])
		}
		var se *sender.SendError
		if errors.As(all.Errs[1], &se) && se.Attempts > 1 {
			t.Errorf("too large message was retried: %d attempts", se.Attempts)
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		r := q.NewReceiver(t, azservicebus.ReceiveModeReceiveAndDelete, false)
		got := ids(receiveN(t, r, 2))
		if got[0] != "small-1" || got[1] != "small-2" {
			t.Errorf("received %v, want [small-1 small-2]", got)
		}
		expectEmpty(t, q, r)
	}
}

// senderScheduled: a message scheduled through the sender is held by the broker until
// its time and arrives with that ScheduledEnqueueTime; one sent next to it arrives at
// once.
func senderScheduled(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	s, err := sender.New(q.NewSender(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	// The broker's clock may differ from ours on a real namespace: the schedule is far
	// enough ahead that a message delivered at once is told apart from one held.
	const ahead, skew = 2 * time.Second, time.Second
	// "now" goes first, so that a slow machine that takes longer than ahead to get here
	// cannot make the scheduled message look early: the hold is checked by its arrival
	// time.
	if err := s.Send(ctx, message("now", "y")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	at := time.Now().Add(ahead).Truncate(time.Millisecond)
	if err := s.Schedule(ctx, message("scheduled", "x"), at); err != nil {
		t.Fatalf("Schedule: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	r := q.NewReceiver(t, azservicebus.ReceiveModeReceiveAndDelete, false)
	first := receiveN(t, r, 1)[0]
	if first.MessageID != "now" {
		t.Fatalf("first message %q, want the one sent without a schedule", first.MessageID)
	}
	got := receiveN(t, r, 1)[0]
	arrived := time.Now()
	if got.MessageID != "scheduled" {
		t.Fatalf("second message %q, want the scheduled one", got.MessageID)
	}
	if arrived.Before(at.Add(-skew)) {
		t.Errorf("scheduled message arrived %v before its time", at.Sub(arrived))
	}
	if got.ScheduledEnqueueTime == nil || !got.ScheduledEnqueueTime.Equal(at) {
		t.Errorf("ScheduledEnqueueTime %v, want %v", deref(got.ScheduledEnqueueTime), at)
	}
	expectEmpty(t, q, r)
}
