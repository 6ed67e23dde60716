package sender_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

// storedOrder returns the message IDs of each session in the order the broker stored them.
func storedOrder(q *sbtest.Entity) map[string][]string {
	active := q.Active()
	slices.SortFunc(active, func(a, b *azservicebus.ReceivedMessage) int {
		return int(*a.SequenceNumber - *b.SequenceNumber)
	})
	got := map[string][]string{}
	for _, m := range active {
		key := ""
		if m.SessionID != nil {
			key = *m.SessionID
		} else if m.PartitionKey != nil {
			key = *m.PartitionKey
		}
		got[key] = append(got[key], m.MessageID)
	}
	return got
}

// checkStoredOrder compares, key by key, the order the broker stored the messages in
// (got) with the order they were sent in (want). With wantOrdered every key must match;
// without, some key must not (else the test could not see reordering).
func checkStoredOrder(t *testing.T, got, want map[string][]string, wantOrdered bool) {
	t.Helper()
	ordered := true
	for key := range want {
		if !slices.Equal(got[key], want[key]) {
			ordered = false
			if wantOrdered {
				t.Errorf("key %s stored as %v, sent as %v", key, got[key], want[key])
			}
		}
	}
	if !wantOrdered && ordered {
		t.Error("no reordering: the test cannot see reordering")
	}
}

// TestOrderingPerKey: the first requests fail transiently and are retried after a
// backoff. With Ordered, nothing of the same key overtakes them; without, later messages
// overtake (which shows that the test can see reordering).
func TestOrderingPerKey(t *testing.T) {
	tests := []struct {
		name        string
		opts        sender.Options
		wantOrdered bool
	}{
		{"ordered single", sender.Options{Ordered: true, DisableBatching: true}, true},
		{"ordered batched", sender.Options{Ordered: true, MaxBatchMessages: 3}, true},
		{"unordered single", sender.Options{DisableBatching: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 2 * time.Millisecond}, nil)
				s := newSender(t, b.s, &tt.opts)
				b.q.InjectFault(sbtest.Fault{Count: 3})
				want := map[string][]string{}
				var rs []*sender.Result
				for i := range 60 {
					var m *azservicebus.Message
					key := fmt.Sprintf("k%d", i%3)
					if i%2 == 0 {
						key = "session-" + key
						m = sessionMsg(key, i)
					} else {
						key = "partition-" + key
						m = msg(i)
						m.PartitionKey = &key
					}
					want[key] = append(want[key], *m.MessageID)
					rs = append(rs, sendAsync(t, t.Context(), s, m)...)
				}
				for _, r := range rs {
					if err := r.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				checkStoredOrder(t, storedOrder(b.q), want, tt.wantOrdered)
				if s.Stats().SendRetries == 0 {
					t.Error("no retries happened")
				}
			})
		})
	}
}

// TestOrderKey: messages without SessionID or PartitionKey keep their order per
// OrderKey under Ordered, batched or not, although their first requests fail and are
// retried; without an OrderKey the same messages are reordered (the test can see it).
func TestOrderKey(t *testing.T) {
	orderKey := func(m *azservicebus.Message) string { return m.ApplicationProperties["k"].(string) }
	tests := []struct {
		name        string
		opts        sender.Options
		wantOrdered bool
	}{
		{"batched", sender.Options{Ordered: true, MaxBatchMessages: 3, OrderKey: orderKey}, true},
		{"single", sender.Options{Ordered: true, DisableBatching: true, OrderKey: orderKey}, true},
		{"without OrderKey", sender.Options{Ordered: true, MaxBatchMessages: 3}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 2 * time.Millisecond}, nil)
				s := newSender(t, b.s, &tt.opts)
				b.q.InjectFault(sbtest.Fault{Count: 3})
				want := map[string][]string{}
				var rs []*sender.Result
				for i := range 60 {
					m := msg(i)
					key := fmt.Sprintf("k%d", i%3)
					m.ApplicationProperties = map[string]any{"k": key}
					want[key] = append(want[key], *m.MessageID)
					rs = append(rs, sendAsync(t, t.Context(), s, m)...)
				}
				for _, r := range rs {
					if err := r.Wait(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
				active := b.q.Active()
				slices.SortFunc(active, func(a, b *azservicebus.ReceivedMessage) int {
					return int(*a.SequenceNumber - *b.SequenceNumber)
				})
				got := map[string][]string{}
				for _, m := range active {
					k := m.ApplicationProperties["k"].(string)
					got[k] = append(got[k], m.MessageID)
				}
				checkStoredOrder(t, got, want, tt.wantOrdered)
			})
		})
	}
}

// TestOrderKeyKeepsSessionsApart: an OrderKey refines a session's key and never merges
// two sessions: a batch carries one session (Service Bus refuses a batch of two), so
// messages of two sessions with the same OrderKey still travel in separate batches.
func TestOrderKeyKeepsSessionsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBroker(t, sbtest.Latency{RoundTrip: time.Millisecond}, nil)
		var batches batchCount
		s := newSender(t, b.s, &sender.Options{Ordered: true, OrderKey: func(*azservicebus.Message) string { return "same" },
			Hooks: []sender.Hook{&batches}})
		var rs []*sender.Result
		for i := range 10 {
			rs = append(rs, sendAsync(t, t.Context(), s, sessionMsg(fmt.Sprint("s", i%2), i))...)
		}
		for _, r := range rs {
			if err := r.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if n := batches.n.Load(); n != 2 {
			t.Fatalf("%d batches, want one per session", n)
		}
	})
}

// batchCount counts batch requests.
type batchCount struct{ n atomic.Int64 }

func (c *batchCount) OnSendBatch(context.Context, sender.SendBatch) { c.n.Add(1) }

// TestOrderedLaneMergesQueuedGroups: messages of one key that Linger sealed one by one
// while the key's request was in flight go together in the next request, in order, as
// far as MaxBatchMessages allows, instead of one request each.
func TestOrderedLaneMergesQueuedGroups(t *testing.T) {
	tests := []struct {
		name        string
		maxMessages int
		wantBatches int64
	}{
		{"defaults", 0, 2},     // the first message, then the four that waited for it
		{"batches of 3", 3, 3}, // the first, then 3, then 1
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newBroker(t, sbtest.Latency{RoundTrip: 10 * time.Millisecond}, nil)
				s := newSender(t, b.s, &sender.Options{Ordered: true, Linger: time.Millisecond, MaxBatchMessages: tt.maxMessages})
				var rs []*sender.Result
				var want []string
				for i := range 5 {
					m := sessionMsg("S", i)
					r, err := s.SendAsync(context.Background(), m)
					if err != nil {
						t.Fatal(err)
					}
					rs = append(rs, r)
					want = append(want, *m.MessageID)
					time.Sleep(2 * time.Millisecond) // past the Linger: each message is sealed alone
				}
				for _, r := range rs {
					if err := r.Wait(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if got := b.q.Stats().Batches; got != tt.wantBatches {
					t.Errorf("%d batches, want %d", got, tt.wantBatches)
				}
				checkStoredOrder(t, storedOrder(b.q), map[string][]string{"S": want}, true)
			})
		})
	}
}
