// Package heapq is an indexed binary min-heap: every element knows its position, so an
// element can be fixed or removed from the middle in O(log n). It is the one heap that
// the lock engine, the dedupe memory store and sbtest share. A Heap is not safe for
// concurrent use.
package heapq

import "container/heap"

// Heap orders elements by less. setIndex is called whenever an element moves, with its
// new position, or with -1 when it leaves the heap.
type Heap[T any] struct {
	h inner[T]
}

// New returns an empty heap.
func New[T any](less func(a, b T) bool, setIndex func(x T, i int)) *Heap[T] {
	return &Heap[T]{h: inner[T]{less: less, setIndex: setIndex}}
}

// Len is the number of elements.
func (q *Heap[T]) Len() int { return len(q.h.s) }

// Push adds x.
func (q *Heap[T]) Push(x T) { heap.Push(&q.h, x) }

// Peek returns the least element without removing it; ok is false when q is empty.
func (q *Heap[T]) Peek() (x T, ok bool) {
	if len(q.h.s) == 0 {
		return x, false
	}
	return q.h.s[0], true
}

// At returns the element at position i (as given to setIndex); 0 <= i < Len().
func (q *Heap[T]) At(i int) T { return q.h.s[i] }

// Pop removes and returns the least element; q must not be empty.
func (q *Heap[T]) Pop() T { return heap.Pop(&q.h).(T) }

// Remove removes the element at position i (as given to setIndex) and returns it.
func (q *Heap[T]) Remove(i int) T { return heap.Remove(&q.h, i).(T) }

// Fix restores the order after the element at position i changed its key.
func (q *Heap[T]) Fix(i int) { heap.Fix(&q.h, i) }

type inner[T any] struct {
	s        []T
	less     func(a, b T) bool
	setIndex func(T, int)
}

func (h *inner[T]) Len() int           { return len(h.s) }
func (h *inner[T]) Less(i, j int) bool { return h.less(h.s[i], h.s[j]) }
func (h *inner[T]) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.setIndex(h.s[i], i)
	h.setIndex(h.s[j], j)
}
func (h *inner[T]) Push(x any) {
	v := x.(T)
	h.setIndex(v, len(h.s))
	h.s = append(h.s, v)
}
func (h *inner[T]) Pop() any {
	n := len(h.s) - 1
	v := h.s[n]
	var zero T
	h.s[n] = zero
	h.s = h.s[:n]
	h.setIndex(v, -1)
	return v
}
