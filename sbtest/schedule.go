package sbtest

import "time"

// outgoing is one message on its way into the broker.
type outgoing struct {
	p     *payload
	sched time.Time // zero: enqueue at once
	seq   int64
}

// sendTarget is what a Sender sends to: a queue or a topic.
type sendTarget interface {
	store(now time.Time, out []outgoing) []int64
	cancel(now time.Time, seqs []int64)
	sendFaults() *faultSet
	sendStats() *counters
	lifespan() *lifetime
}

func (e *Entity) sendFaults() *faultSet { return &e.faults }
func (e *Entity) sendStats() *counters  { return &e.stats }
func (e *Entity) lifespan() *lifetime   { return &e.life }

// store stores messages sent to a queue and returns their sequence numbers (0 for a
// dropped duplicate).
func (e *Entity) store(now time.Time, out []outgoing) []int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(now)
	seqs := make([]int64, len(out))
	for i, o := range out {
		if !e.dup.accept(o.p.messageID, now) {
			e.stats.duplicates.Add(1)
			continue
		}
		seqs[i] = e.seqs.Add(1)
		e.insert(o.p, seqs[i], now, o.sched)
	}
	return seqs
}

func (e *Entity) cancel(now time.Time, seqs []int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cancelLocked(now, seqs)
}

// cancelLocked removes the scheduled messages among seqs; unknown or no longer scheduled
// sequence numbers are ignored. It returns the ones removed.
func (e *Entity) cancelLocked(now time.Time, seqs []int64) []int64 {
	e.tick(now)
	var done []int64
	for _, seq := range seqs {
		m := e.main.bySeq[seq]
		if m == nil || m.state != stScheduled {
			continue
		}
		e.detach(&e.main, m)
		e.stats.cancelled.Add(1)
		done = append(done, seq)
	}
	return done
}
