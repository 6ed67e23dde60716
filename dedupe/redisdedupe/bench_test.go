package redisdedupe_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sbkit/sbkit/dedupe/redisdedupe"
)

// BenchmarkDedupe measures one message checked and marked (Acquire + MarkDone on a new
// key, two script round trips) against the Redis at SBKIT_REDIS_ADDR.
func BenchmarkDedupe(b *testing.B) {
	ctx := context.Background()
	c := newClient(b)
	b.Run("redis", func(b *testing.B) {
		s, _ := redisdedupe.New(c, &redisdedupe.Options{Prefix: "sbkit-bench:" + runID + ":"})
		i := 0
		for b.Loop() {
			key := strconv.Itoa(i)
			i++
			if _, err := s.Acquire(ctx, key, "w", time.Minute); err != nil {
				b.Fatal(err)
			}
			if err := s.MarkDone(ctx, key, "w", 10*time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis-parallel", func(b *testing.B) {
		s, _ := redisdedupe.New(c, &redisdedupe.Options{Prefix: "sbkit-bench-p:" + runID + ":"})
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				key := strconv.FormatInt(n.Add(1), 10)
				if _, err := s.Acquire(ctx, key, "w", time.Minute); err != nil {
					b.Fatal(err)
				}
				if err := s.MarkDone(ctx, key, "w", 10*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
