package locks

// lockHeap is a min-heap of locks ordered by due time, for container/heap. Each lock keeps
// its index so that Release can remove it in O(log n).
type lockHeap []*Lock

func (h lockHeap) Len() int           { return len(h) }
func (h lockHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h lockHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}

func (h *lockHeap) Push(x any) {
	l := x.(*Lock)
	l.index = len(*h)
	*h = append(*h, l)
}

func (h *lockHeap) Pop() any {
	old := *h
	n := len(old)
	l := old[n-1]
	old[n-1] = nil
	l.index = -1
	*h = old[:n-1]
	return l
}
