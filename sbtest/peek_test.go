package sbtest

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Peeking page by page from any sequence number returns the next messages in
// sequence-number order, whatever the page size, and every message exactly once.
func TestPeekPagesFromAnySequenceNumber(t *testing.T) {
	ns := NewTestNamespace(t, nil)
	if _, err := ns.NewQueue("q", nil); err != nil {
		t.Fatal(err)
	}
	const n = 1000
	mustSend(t, ns, "q", func() []*azservicebus.Message {
		ms := make([]*azservicebus.Message, n)
		for i := range ms {
			ms[i] = &azservicebus.Message{Body: []byte{byte(i)}}
		}
		return ms
	}()...)
	r, _ := ns.NewReceiverForQueue("q", nil)
	ctx := context.Background()
	for _, size := range []int{1, 7, 50, 999, 1000, 5000} {
		for _, start := range []int64{0, 1, 2, 500, 999, 1000, 1001} {
			next, seen := start, 0
			for {
				ms, err := r.PeekMessages(ctx, size, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &next})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					if want := max(start, 1) + int64(seen); *m.SequenceNumber != want {
						t.Fatalf("size %d from %d: got %d, want %d", size, start, *m.SequenceNumber, want)
					}
					seen++
					next = *m.SequenceNumber + 1
				}
				if len(ms) < size {
					break
				}
			}
			if want := n - int(max(start, 1)) + 1; seen != max(want, 0) {
				t.Fatalf("size %d from %d: saw %d messages, want %d", size, start, seen, want)
			}
		}
	}
}
