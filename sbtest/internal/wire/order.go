package wire

import "sync"

// arrivalOrder makes the client's frames on one session take effect in the order they
// arrived, while the waits before their effects (the latency model's) overlap. The
// reader reserves a turn for a frame when it reads it; the frame's work waits in its own
// goroutine, then waits for its turn (every frame read before it has taken effect),
// applies its effect, writes its answer and ends its turn. So a transfer is stored (or
// refused) before a later detach, end or close takes effect, a settlement before a later
// detach, and sequence numbers follow arrival order (Service Bus docs, "Message
// sequencing and timestamps": the sequence number is the true order of arrival).
//
// Whatever waits before its turn must end when its link stops (a detach, end or
// close arrived): the link's context ends the latency model's waits and hanging faults,
// and the effect is applied without them. A hanging fault holds the turns after it until
// then. The zero value has no turn pending. Safe for concurrent use.
type arrivalOrder struct {
	mu   sync.Mutex
	last chan struct{} // closed when the last turn reserved has ended; nil: none yet
}

// turn is one frame's place in an arrivalOrder.
type turn struct {
	prev <-chan struct{} // closed when the turn before this one has ended
	done chan struct{}   // closed by end
}

// reserve returns the next turn. Call it in arrival order (on the reader goroutine, or
// under the lock that orders the frames), and end every turn it returns exactly once.
func (o *arrivalOrder) reserve() turn {
	t := turn{done: make(chan struct{})}
	o.mu.Lock()
	t.prev = o.last
	o.last = t.done
	o.mu.Unlock()
	return t
}

// wait waits until every turn reserved before t has ended.
func (t turn) wait() {
	if t.prev != nil {
		<-t.prev
	}
}

// now reports whether t's turn has come.
func (t turn) now() bool { return t.prev == nil || chanClosed(t.prev) }

// end lets the turn after t go.
func (t turn) end() { close(t.done) }

// inTurn runs effect once every frame of the session that arrived before has taken
// effect (see runInTurn). It returns a channel closed once effect has run.
func (s *srvSession) inTurn(what string, effect func()) <-chan struct{} {
	t := s.order.reserve()
	s.runInTurn(t, what, effect)
	return t.done
}

// runInTurn runs effect in turn t and ends t: at once on the caller's goroutine when t's
// turn has come, otherwise in a goroutine of the connection.
func (s *srvSession) runInTurn(t turn, what string, effect func()) {
	if t.now() {
		defer t.end()
		effect()
		return
	}
	s.c.goWork(what, func() {
		defer t.end()
		t.wait()
		effect()
	})
}
