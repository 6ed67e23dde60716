package dedupe_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/dedupe"
)

// BenchmarkDedupe measures one message checked and marked: Acquire + MarkDone on a new
// key (the store stays full at its default bound, so eviction is included), then the
// whole Filter around a no-op handler, then a duplicate skipped.
func BenchmarkDedupe(b *testing.B) {
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		s, _ := dedupe.NewMemoryStore(nil)
		i := 0
		for b.Loop() {
			key := "orders:" + strconv.Itoa(i)
			i++
			if _, err := s.Acquire(ctx, key, "w", time.Minute); err != nil {
				b.Fatal(err)
			}
			if err := s.MarkDone(ctx, key, "w", time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("memory-parallel", func(b *testing.B) {
		s, _ := dedupe.NewMemoryStore(nil)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := "orders:" + strconv.FormatInt(n.Add(1), 10)
				if _, err := s.Acquire(ctx, key, "w", time.Minute); err != nil {
					b.Fatal(err)
				}
				if err := s.MarkDone(ctx, key, "w", time.Hour); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("filter-memory", func(b *testing.B) {
		f, _ := dedupe.New(memStore(), &dedupe.Options{Entity: "orders"})
		h, _ := f.Wrap(func(context.Context, *azservicebus.ReceivedMessage) error { return nil })
		m := &azservicebus.ReceivedMessage{}
		i := 0
		for b.Loop() {
			m.MessageID = strconv.Itoa(i)
			i++
			if err := h(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("filter-memory-duplicate", func(b *testing.B) {
		f, _ := dedupe.New(memStore(), &dedupe.Options{Entity: "orders"})
		h, _ := f.Wrap(func(context.Context, *azservicebus.ReceivedMessage) error { return nil })
		m := &azservicebus.ReceivedMessage{MessageID: "same"}
		_ = h(ctx, m)
		for b.Loop() {
			if err := h(ctx, m); err == nil {
				b.Fatal("duplicate processed")
			}
		}
	})
}
