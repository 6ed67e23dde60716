package sender

import (
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// A lane holds the messages of one key (SessionID, PartitionKey, or "" for neither)
// that are not on the wire yet: the open linger batch, and, when ordering is on, the
// sealed groups waiting for the lane's single in-flight request. All fields are guarded
// by Sender.mu.
type lane struct {
	key       string
	open      []*Result   // the linger batch being filled (batching only)
	openBytes int64       // estimated size of open
	timer     *time.Timer // linger timer of open; nil when open is empty
	gen       uint64      // invalidates a linger timer that fired after its batch was sealed
	queue     [][]*Result // sealed groups waiting (ordering only)
	busy      bool        // a goroutine is sending this lane's queue (ordering only)
}

func (s *Sender) laneLocked(key string) *lane {
	l := s.lanes[key]
	if l == nil {
		l = &lane{key: key}
		s.lanes[key] = l
	}
	return l
}

// dropLaneLocked forgets l when it holds nothing.
func (s *Sender) dropLaneLocked(l *lane) {
	if len(l.open) == 0 && len(l.queue) == 0 && !l.busy && s.lanes[l.key] == l {
		delete(s.lanes, l.key)
	}
}

func (s *Sender) maxBatchBytes() int64 {
	if s.opts.MaxBatchBytes > 0 {
		return s.opts.MaxBatchBytes
	}
	return DefaultMaxBatchBytes
}

// addToBatchLocked puts r in the open batch of its lane, sealing batches that are full.
func (s *Sender) addToBatchLocked(r *Result) {
	l := s.laneLocked(r.key)
	maxBytes := s.maxBatchBytes()
	if len(l.open) > 0 && l.openBytes+r.size > maxBytes {
		s.sealLocked(l)
		// Sealing may drop l from s.lanes; the next batch must live in the map, where
		// Flush and Close find it.
		l = s.laneLocked(r.key)
	}
	l.open = append(l.open, r)
	l.openBytes += r.size
	switch {
	case len(l.open) >= s.opts.MaxBatchMessages || l.openBytes >= maxBytes:
		s.sealLocked(l)
	case len(l.open) == 1:
		l.gen++
		gen := l.gen
		s.goroutines.Add(1) // Done by the callback, or by sealLocked when it stops the timer
		l.timer = time.AfterFunc(s.opts.Linger, func() {
			defer s.goroutines.Done()
			s.lingerExpired(l, gen)
		})
	}
}

func (s *Sender) lingerExpired(l *lane, gen uint64) {
	s.mu.Lock()
	if l.gen == gen && len(l.open) > 0 {
		s.sealLocked(l)
	}
	s.mu.Unlock()
}

// sealLocked closes l's open batch and sends it, or queues it behind the lane's
// in-flight request when ordering is on.
func (s *Sender) sealLocked(l *lane) {
	if l.timer != nil {
		if l.timer.Stop() {
			s.goroutines.Done()
		}
		l.timer = nil
	}
	l.gen++
	group := l.open
	l.open, l.openBytes = nil, 0
	if len(group) == 0 {
		return
	}
	if s.opts.Ordered && l.key != "" {
		s.enqueueLocked(l, group)
		return
	}
	s.dropLaneLocked(l)
	s.goroutines.Go(func() { s.sendGroup(group) })
}

func (s *Sender) sealAllLocked() {
	for _, l := range s.lanes {
		if len(l.open) > 0 {
			s.sealLocked(l)
		}
	}
}

// enqueueLocked queues a sealed group on an ordered lane and starts the lane's sending
// goroutine when none runs.
func (s *Sender) enqueueLocked(l *lane, group []*Result) {
	l.queue = append(l.queue, group)
	if !l.busy {
		l.busy = true
		s.goroutines.Go(func() { s.runLane(l) })
	}
}

// runLane sends an ordered lane's groups one request at a time. With batching, groups
// that queued up behind a request go together, as far as a sealed batch may hold them
// (MaxBatchMessages, MaxBatchBytes): groups sealed by Linger while the lane was busy
// would otherwise go one small request each.
func (s *Sender) runLane(l *lane) {
	for {
		s.mu.Lock()
		if len(l.queue) == 0 {
			l.busy = false
			s.dropLaneLocked(l)
			s.mu.Unlock()
			return
		}
		group := l.queue[0]
		take := 1
		if s.batch != nil {
			n, bytes := len(group), groupBytes(group)
			for ; take < len(l.queue); take++ {
				next := l.queue[take]
				nb := groupBytes(next)
				if n+len(next) > s.opts.MaxBatchMessages || bytes+nb > s.maxBatchBytes() {
					break
				}
				if take == 1 {
					group = slices.Clone(group)
				}
				group = append(group, next...)
				n, bytes = n+len(next), bytes+nb
			}
		}
		clear(l.queue[:take])
		l.queue = l.queue[take:]
		s.mu.Unlock()
		s.sendGroup(group)
	}
}

// groupBytes is the estimated size of a group's messages.
func groupBytes(group []*Result) int64 {
	var n int64
	for _, r := range group {
		n += r.size
	}
	return n
}

// dispatchLocked hands an unordered single message to a worker, starting one when every
// worker is taken. Workers keep taking messages while there are any, so a steady stream
// reuses goroutines (and their grown stacks) instead of starting one per message; there
// are never more workers than messages in flight.
func (s *Sender) dispatchLocked(r *Result) {
	s.work = append(s.work, r)
	s.jobs++
	if s.workers < s.jobs {
		s.workers++
		s.goroutines.Go(s.worker)
	}
}

func (s *Sender) worker() {
	s.mu.Lock()
	for len(s.work) > 0 {
		r := s.work[0]
		s.work[0] = nil
		s.work = s.work[1:]
		s.mu.Unlock()
		err := s.trySingle(r)
		s.mu.Lock()
		s.jobs-- // before finish frees room, so that the next message finds this worker
		s.mu.Unlock()
		s.finish(r, err)
		s.mu.Lock()
	}
	s.workers--
	s.mu.Unlock()
}

// keyOf returns the ordering and batching key of a message: its SessionID, or its
// PartitionKey when it has no SessionID, or "" when it has neither; refined by
// [Options.OrderKey].
func (s *Sender) keyOf(m *azservicebus.Message) string {
	var k string
	switch {
	case m.SessionID != nil:
		k = "s:" + *m.SessionID
	case m.PartitionKey != nil:
		k = "p:" + *m.PartitionKey
	}
	if s.opts.OrderKey != nil {
		if o := s.opts.OrderKey(m); o != "" {
			// Length-prefixed: never equal to a plain key, nor to another (key, o) pair.
			k = strconv.Itoa(len(k)) + ":" + k + o
		}
	}
	return k
}
