package sbtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func TestSequenceNumbersMonotonicAndGapless(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	const senders, each = 8, 50
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for range each {
				if err := f.s.SendMessage(ctx, msg("x"), nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var seqs []int64
	for len(seqs) < senders*each {
		for _, m := range receive(t, f.r, 100, time.Second) {
			seqs = append(seqs, *m.SequenceNumber)
		}
	}
	if !slices.IsSorted(seqs) {
		t.Fatal("messages not delivered in sequence order")
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seqs[%d] = %d, want %d (gapless from 1)", i, s, i+1)
		}
	}
	// Scheduled messages take numbers from the same sequence.
	got, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{msg("a"), msg("b")}, time.Now().Add(time.Hour), nil)
	if err != nil || !slices.Equal(got, []int64{senders*each + 1, senders*each + 2}) {
		t.Fatalf("ScheduleMessages = %v, %v", got, err)
	}
}

func TestReceivedMessageFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, &EntityOptions{LockDuration: 30 * time.Second, DefaultTTL: time.Hour})
		ttl := 10 * time.Minute
		sent := &azservicebus.Message{
			Body:                  []byte("body"),
			ApplicationProperties: map[string]any{"k": "v", "n": 7},
			ContentType:           sp("application/json"),
			CorrelationID:         sp("corr"),
			MessageID:             sp("id-1"),
			PartitionKey:          sp("pk"),
			ReplyTo:               sp("reply"),
			ReplyToSessionID:      sp("rs"),
			SessionID:             sp("sess"),
			Subject:               sp("subj"),
			TimeToLive:            &ttl,
			To:                    sp("to"),
		}
		start := time.Now()
		if err := f.s.SendMessage(context.Background(), sent, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		m := receiveOne(t, f.r)
		now := time.Now()
		checks := []struct {
			name string
			ok   bool
		}{
			{"Body", string(m.Body) == "body"},
			{"ApplicationProperties", m.ApplicationProperties["k"] == "v" && m.ApplicationProperties["n"] == 7},
			{"ContentType", *m.ContentType == "application/json"},
			{"CorrelationID", *m.CorrelationID == "corr"},
			{"MessageID", m.MessageID == "id-1"},
			{"PartitionKey", *m.PartitionKey == "pk"},
			{"ReplyTo", *m.ReplyTo == "reply"},
			{"ReplyToSessionID", *m.ReplyToSessionID == "rs"},
			{"SessionID", *m.SessionID == "sess"},
			{"Subject", *m.Subject == "subj"},
			{"To", *m.To == "to"},
			{"SequenceNumber", *m.SequenceNumber == 1},
			{"EnqueuedTime", m.EnqueuedTime.Equal(start)},
			{"TimeToLive", *m.TimeToLive == ttl},
			{"ExpiresAt", m.ExpiresAt.Equal(start.Add(ttl))},
			{"LockedUntil", m.LockedUntil.Equal(now.Add(30 * time.Second))},
			{"LockToken", m.LockToken != [16]byte{}},
			{"DeliveryCount", m.DeliveryCount == 1},
			{"State", m.State == azservicebus.MessageStateActive},
			{"no dead-letter fields", m.DeadLetterReason == nil && m.DeadLetterErrorDescription == nil},
			{"ScheduledEnqueueTime", m.ScheduledEnqueueTime == nil},
		}
		for _, c := range checks {
			if !c.ok {
				t.Errorf("%s wrong in %+v", c.name, m)
			}
		}
	})
}

func TestEffectiveTTLOnMessage(t *testing.T) {
	tests := []struct {
		name       string
		entityTTL  time.Duration
		messageTTL *time.Duration
		want       time.Duration
	}{
		{"none", 0, nil, sbkit.MaxTTL},
		{"message only", 0, ptr(time.Minute), time.Minute},
		{"entity only", time.Hour, nil, time.Hour},
		{"message below entity", time.Hour, ptr(time.Minute), time.Minute},
		{"message capped at entity", time.Minute, ptr(time.Hour), time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, &EntityOptions{DefaultTTL: tt.entityTTL})
			if err := f.s.SendMessage(context.Background(), &azservicebus.Message{TimeToLive: tt.messageTTL}, nil); err != nil {
				t.Fatal(err)
			}
			m := receiveOne(t, f.r)
			if *m.TimeToLive != tt.want {
				t.Fatalf("TimeToLive = %v, want %v", *m.TimeToLive, tt.want)
			}
			if want := sbkit.ExpiresAt(*m.EnqueuedTime, tt.want); !m.ExpiresAt.Equal(want) {
				t.Fatalf("ExpiresAt = %v, want %v", *m.ExpiresAt, want)
			}
		})
	}
}

func TestMessagesAreDeepCopied(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	sent := &azservicebus.Message{
		Body:                  []byte("orig"),
		ApplicationProperties: map[string]any{"k": "v", "b": []byte("bytes")},
		Subject:               sp("subj"),
	}
	if err := f.s.SendMessage(ctx, sent, nil); err != nil {
		t.Fatal(err)
	}
	// The test mutates what it sent...
	sent.Body[0] = 'X'
	sent.ApplicationProperties["k"] = "changed"
	sent.ApplicationProperties["b"].([]byte)[0] = 'X'
	*sent.Subject = "changed"
	m := receiveOne(t, f.r)
	if string(m.Body) != "orig" || m.ApplicationProperties["k"] != "v" ||
		string(m.ApplicationProperties["b"].([]byte)) != "bytes" || *m.Subject != "subj" {
		t.Fatalf("sender mutations leaked into the broker: %q %v %q", m.Body, m.ApplicationProperties, *m.Subject)
	}
	// ...and what it received.
	m.Body[0] = 'Y'
	m.ApplicationProperties["k"] = "changed"
	*m.Subject = "changed"
	if err := f.r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	m2 := receiveOne(t, f.r)
	if string(m2.Body) != "orig" || m2.ApplicationProperties["k"] != "v" || *m2.Subject != "subj" {
		t.Fatalf("receiver mutations leaked into the broker: %q %v %q", m2.Body, m2.ApplicationProperties, *m2.Subject)
	}
	// Batches copy on AddMessage.
	b, _ := f.s.NewBatch(ctx, nil)
	bm := msg("batch")
	if err := b.AddMessage(bm, nil); err != nil {
		t.Fatal(err)
	}
	bm.Body[0] = 'X'
	if err := f.s.SendBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.r.CompleteMessage(ctx, m2, nil); err != nil {
		t.Fatal(err)
	}
	if got := string(receiveOne(t, f.r).Body); got != "batch" {
		t.Fatalf("batch body = %q", got)
	}
}
