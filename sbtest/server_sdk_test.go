package sbtest

import (
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

func TestServerSendReceiveComplete(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	ttl := 90 * time.Second
	in := &azservicebus.Message{
		Body:                  []byte("hello"),
		MessageID:             sp("id-1"),
		ContentType:           sp("text/plain"),
		CorrelationID:         sp("corr"),
		Subject:               sp("subj"),
		To:                    sp("to"),
		ReplyTo:               sp("reply"),
		PartitionKey:          sp("pk"),
		TimeToLive:            &ttl,
		ApplicationProperties: map[string]any{"s": "v", "i": int64(42), "i32": int32(7), "b": true, "f": 1.5},
	}
	if err := s.SendMessage(ctx, in, nil); err != nil {
		t.Fatal(err)
	}
	q, _ := w.srv.Namespace().Entity("q")
	if n := q.ActiveCount(); n != 1 {
		t.Fatalf("active = %d, want 1", n)
	}

	r := w.receiver(t, "q", nil)
	got := receiveN(t, r, 1)[0]
	if string(got.Body) != "hello" || got.MessageID != "id-1" || *got.ContentType != "text/plain" ||
		*got.CorrelationID != "corr" || *got.Subject != "subj" || *got.To != "to" || *got.ReplyTo != "reply" ||
		*got.PartitionKey != "pk" {
		t.Fatalf("received %+v", got)
	}
	if got.DeliveryCount != 1 || got.SequenceNumber == nil || *got.SequenceNumber != 1 {
		t.Fatalf("delivery count %d, sequence number %v", got.DeliveryCount, got.SequenceNumber)
	}
	if got.TimeToLive == nil || *got.TimeToLive != ttl || got.ExpiresAt == nil || !got.ExpiresAt.Equal(got.EnqueuedTime.Add(ttl)) {
		t.Fatalf("ttl %v, expires %v, enqueued %v", got.TimeToLive, got.ExpiresAt, got.EnqueuedTime)
	}
	if got.LockedUntil == nil || time.Until(*got.LockedUntil) < 30*time.Second {
		t.Fatalf("locked until %v", got.LockedUntil)
	}
	if got.LockToken == ([16]byte{}) {
		t.Fatal("no lock token")
	}
	for k, want := range in.ApplicationProperties {
		if got.ApplicationProperties[k] != want {
			t.Errorf("property %q = %#v, want %#v", k, got.ApplicationProperties[k], want)
		}
	}
	if got.State != azservicebus.MessageStateActive {
		t.Fatalf("state %v", got.State)
	}
	locked := q.Locked()
	if len(locked) != 1 || locked[0].LockToken != got.LockToken {
		t.Fatalf("the SDK's lock token %x is not the entity's %v", got.LockToken, locked)
	}
	if err := r.CompleteMessage(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.Completed != 1 || q.ActiveCount()+q.LockedCount() != 0 {
		t.Fatalf("after complete: %+v", st)
	}
}
