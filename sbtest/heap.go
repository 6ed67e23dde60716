package sbtest

import "container/heap"

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

type msgHeap struct {
	kind heapKind
	s    []*message
}

func (h *msgHeap) Len() int { return len(h.s) }

func (h *msgHeap) Less(i, j int) bool {
	a, b := h.s[i], h.s[j]
	var ta, tb int64
	switch h.kind {
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

func (h *msgHeap) Swap(i, j int) {
	h.s[i], h.s[j] = h.s[j], h.s[i]
	h.s[i].idx[h.kind] = i
	h.s[j].idx[h.kind] = j
}

func (h *msgHeap) Push(x any) {
	m := x.(*message)
	m.idx[h.kind] = len(h.s)
	h.s = append(h.s, m)
}

func (h *msgHeap) Pop() any {
	n := len(h.s) - 1
	m := h.s[n]
	h.s[n] = nil
	h.s = h.s[:n]
	m.idx[h.kind] = -1
	return m
}

func (h *msgHeap) add(m *message) { heap.Push(h, m) }

// has reports whether m is in h. A message's index slot for a kind is shared by every
// heap of that kind (a session's available heap and its subqueue's), so removal checks
// that the slot points into h.
func (h *msgHeap) has(m *message) bool {
	i := m.idx[h.kind]
	return i >= 0 && i < len(h.s) && h.s[i] == m
}

func (h *msgHeap) del(m *message) {
	if h.has(m) {
		heap.Remove(h, m.idx[h.kind])
	}
}

func (h *msgHeap) fix(m *message) {
	if h.has(m) {
		heap.Fix(h, m.idx[h.kind])
	}
}

func (h *msgHeap) top() *message {
	if len(h.s) == 0 {
		return nil
	}
	return h.s[0]
}
