package heapq

import (
	"math/rand/v2"
	"slices"
	"testing"
)

type item struct {
	key, idx int
}

func newItemHeap() *Heap[*item] {
	return New(func(a, b *item) bool { return a.key < b.key }, func(x *item, i int) { x.idx = i })
}

func TestHeapOrdersAndTracksIndexes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := newItemHeap()
	var all []*item
	for range 200 {
		it := &item{key: rng.IntN(1000)}
		all = append(all, it)
		q.Push(it)
	}
	// Remove a third from the middle, change the keys of another third.
	var kept []*item
	for i, it := range all {
		switch i % 3 {
		case 0:
			if got := q.Remove(it.idx); got != it || it.idx != -1 {
				t.Fatalf("Remove returned %p (idx %d), want %p (idx -1)", got, it.idx, it)
			}
		case 1:
			it.key = rng.IntN(1000)
			q.Fix(it.idx)
			kept = append(kept, it)
		default:
			kept = append(kept, it)
		}
	}
	if q.Len() != len(kept) {
		t.Fatalf("Len = %d, want %d", q.Len(), len(kept))
	}
	for _, it := range kept {
		if q.At(it.idx) != it {
			t.Fatalf("At(%d) is not the element whose index is %d", it.idx, it.idx)
		}
	}
	slices.SortFunc(kept, func(a, b *item) int { return a.key - b.key })
	for i, want := range kept {
		top, ok := q.Peek()
		if !ok || top.key != want.key {
			t.Fatalf("element %d: Peek = %v, %v; want key %d", i, top, ok, want.key)
		}
		if got := q.Pop(); got.key != want.key || got.idx != -1 {
			t.Fatalf("element %d: Pop key %d idx %d, want key %d idx -1", i, got.key, got.idx, want.key)
		}
	}
	if _, ok := q.Peek(); ok {
		t.Fatal("Peek on an empty heap reported an element")
	}
}
