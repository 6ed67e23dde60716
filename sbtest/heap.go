package sbtest

import "github.com/sbkit/sbkit/internal/heapq"

// heapKind names the orderings a subqueue keeps its messages in. Each message records its
// index in every heap it is in (-1 when absent), so removal from the middle is O(log n).
type heapKind uint8

const (
	hAvail heapKind = iota // available messages by sequence number: delivery order
	hExp                   // available and deferred messages with a finite TTL, by expiry
	hLock                  // locked messages by lock expiry
	hSched                 // scheduled messages by scheduled enqueue time
	numHeaps
)

// msgHeap is one ordering of messages, kept in a [heapq.Heap].
type msgHeap struct {
	kind heapKind
	q    *heapq.Heap[*message]
}

func newMsgHeap(kind heapKind) msgHeap {
	return msgHeap{kind: kind, q: heapq.New(
		func(a, b *message) bool { return before(kind, a, b) },
		func(m *message, i int) { m.idx[kind] = i },
	)}
}

// before orders a and b in a heap of kind: by the kind's time, then by sequence number.
func before(kind heapKind, a, b *message) bool {
	var ta, tb int64
	switch kind {
	case hAvail:
		return a.seq < b.seq
	case hExp:
		ta, tb = a.expiresAt.UnixNano(), b.expiresAt.UnixNano()
	case hLock:
		ta, tb = a.lockedUntil.UnixNano(), b.lockedUntil.UnixNano()
	case hSched:
		ta, tb = a.scheduledAt.UnixNano(), b.scheduledAt.UnixNano()
	}
	if ta != tb {
		return ta < tb
	}
	return a.seq < b.seq
}

func (h *msgHeap) Len() int { return h.q.Len() }

func (h *msgHeap) add(m *message) { h.q.Push(m) }

// has reports whether m is in h. A message's index slot for a kind is shared by every
// heap of that kind (a session's available heap and its subqueue's), so removal checks
// that the slot points into h.
func (h *msgHeap) has(m *message) bool {
	i := m.idx[h.kind]
	return i >= 0 && i < h.q.Len() && h.q.At(i) == m
}

func (h *msgHeap) del(m *message) {
	if h.has(m) {
		h.q.Remove(m.idx[h.kind])
	}
}

func (h *msgHeap) fix(m *message) {
	if h.has(m) {
		h.q.Fix(m.idx[h.kind])
	}
}

func (h *msgHeap) top() *message {
	m, _ := h.q.Peek()
	return m
}
