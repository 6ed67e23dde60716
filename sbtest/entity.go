package sbtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/heapq"
)

// Entity is a queue or a topic subscription: the thing receivers read from. It holds the
// active, locked, deferred and scheduled messages and a dead-letter queue, and offers
// inspection and fault injection. Create queues with Namespace.NewQueue and
// subscriptions with Topic.NewSubscription. All methods are safe for concurrent use.
//
// Time-driven changes (lock expiry, TTL expiry, scheduled messages becoming active) are
// applied lazily against time.Now() at the start of every operation and inspection.
type Entity struct {
	ns         *Namespace
	path       string
	topic      *Topic // nil for a queue
	opts       EntityOptions
	defaultTTL time.Duration
	faults     faultSet
	stats      counters
	rules      ruleSet // subscriptions only (rule.go)
	life       lifetime
	status     statusCell // status.go

	mu   sync.Mutex
	main subqueue
	dlq  subqueue
	seqs *atomic.Int64 // the last sequence number: the queue's own, or its topic's
	dup  dupDetector
	// sessions groups the main queue's messages by session id when the entity requires
	// sessions (nil otherwise), indexed so that no operation walks them all; see
	// msgsession.go.
	sessions     map[string]*session
	readySess    *heapq.Heap[*session] // unlocked sessions with available messages, oldest first
	heldSess     *heapq.Heap[*session] // locked sessions, by lock expiry
	sessAvailLen int                   // available messages over every session
	// accessed is when a message last arrived or a receive was last asked for (a
	// subscription's starts at its creation); reported as AccessedAt (manage.go).
	accessed time.Time
	// watch is closed when the entity's counts may have changed (changed), for
	// WaitUntil; nil when nobody waits (counts.go).
	watch chan struct{}
}

// subqueue is the main queue or the dead-letter queue of an entity, guarded by the
// entity's mutex. bySeq holds every message of the subqueue whatever its state; the heaps
// index them by state.
type subqueue struct {
	dlq     bool
	heaps   [numHeaps]msgHeap
	bySeq   map[int64]*message
	byToken map[[16]byte]*message
	bytes   int64         // the sizes (payload.size) of the messages of bySeq
	wait    chan struct{} // closed when a message becomes available; nil if nobody waits
}

func (sq *subqueue) init(dlq bool) {
	sq.dlq = dlq
	for k := range sq.heaps {
		sq.heaps[k] = newMsgHeap(heapKind(k))
	}
	sq.bySeq = make(map[int64]*message)
	sq.byToken = make(map[[16]byte]*message)
}

func newEntity(ns *Namespace, path string, topic *Topic, opts EntityOptions, defaultTTL time.Duration) *Entity {
	e := &Entity{ns: ns, path: path, topic: topic, opts: opts, defaultTTL: defaultTTL, seqs: new(atomic.Int64)}
	if topic != nil {
		e.seqs = &topic.seqs
	}
	e.main.init(false)
	e.dlq.init(true)
	e.dup.window = opts.DuplicateDetectionWindow
	if opts.RequiresSession {
		e.initSessions()
	}
	return e
}

// put adds the new message m to sq.
func (sq *subqueue) put(m *message) {
	sq.bySeq[m.seq] = m
	sq.bytes += int64(m.p.size)
}

// drop removes m from sq's messages; the caller takes it out of the indexes.
func (sq *subqueue) drop(m *message) {
	delete(sq.bySeq, m.seq)
	sq.bytes -= int64(m.p.size)
}

// signal wakes every ReceiveMessages waiting on sq.
func (sq *subqueue) signal() {
	if sq.wait != nil {
		close(sq.wait)
		sq.wait = nil
	}
}

func (sq *subqueue) waitChan() <-chan struct{} {
	if sq.wait == nil {
		sq.wait = make(chan struct{})
	}
	return sq.wait
}

// nextDue returns the next instant at which time alone can make a message of sq
// available: a lock expiring or a scheduled message becoming active.
func (sq *subqueue) nextDue() (time.Time, bool) {
	var due time.Time
	ok := false
	if m := sq.heaps[hLock].top(); m != nil {
		due, ok = m.lockedUntil, true
	}
	if m := sq.heaps[hSched].top(); m != nil && (!ok || m.scheduledAt.Before(due)) {
		due, ok = m.scheduledAt, true
	}
	return due, ok
}

// tick applies everything that became due by now: lock expiries, scheduled messages
// becoming active, TTL expiries. It costs O(1) when nothing is due.
func (e *Entity) tick(now time.Time) {
	if e.sessions != nil {
		e.tickSessions(now)
	}
	for _, sq := range []*subqueue{&e.main, &e.dlq} {
		for m := sq.heaps[hLock].top(); m != nil && !now.Before(m.lockedUntil); m = sq.heaps[hLock].top() {
			counted := !m.orphaned
			e.unlock(sq, m)
			e.stats.lockExpired.Add(1)
			e.release(sq, m, counted)
		}
	}
	sched := &e.main.heaps[hSched]
	for m := sched.top(); m != nil && !now.Before(m.scheduledAt); m = sched.top() {
		sched.del(m)
		// "As the message transitions to the active state, the message is appended to the
		// queue as if it had been enqueued at the current instant, which includes assigning
		// a new SequenceNumber" (Service Bus docs, message sequencing: scheduled messages).
		delete(e.main.bySeq, m.seq)
		m.seq = e.seqs.Add(1)
		e.main.bySeq[m.seq] = m
		e.makeAvailable(&e.main, m)
	}
	exp := &e.main.heaps[hExp]
	for m := exp.top(); m != nil && !now.Before(m.expiresAt); m = exp.top() {
		e.expire(m)
	}
}

// expire removes an expired message of the main queue: to the dead-letter queue when the
// entity dead-letters on expiration, else dropped.
func (e *Entity) expire(m *message) {
	e.detach(&e.main, m)
	e.stats.expired.Add(1)
	if e.opts.DeadLetterOnExpiration {
		e.toDLQ(m, ptr(sbkit.TTLExpiredReason), ptr("The message expired and was dead lettered."), nil)
	}
}

// newMessage makes the message p becomes in e with sequence number seq, sent at now,
// scheduled for sched (zero or not after now means at once). Called with e.mu held.
func (e *Entity) newMessage(p *payload, seq int64, now, sched time.Time) *message {
	ttl := sbkit.EffectiveTTL(p.ttl, e.defaultTTL)
	m := &message{p: p, seq: seq, ttl: ttl, expires: ttl < sbkit.MaxTTL, count: 1}
	for k := range m.idx {
		m.idx[k] = -1
	}
	m.enqueued = now
	if sched.After(now) {
		m.enqueued, m.scheduledAt = sched, sched
	}
	m.expiresAt = sbkit.ExpiresAt(m.enqueued, ttl)
	return m
}

// insert stores a new message (see newMessage). Called with e.mu held.
func (e *Entity) insert(p *payload, seq int64, now, sched time.Time) {
	e.accessed = now
	p.countForwarded()
	m := e.newMessage(p, seq, now, sched)
	if e.forwardOnInsert(m, sched) || e.forwardHopsExceeded(m) {
		return
	}
	e.main.put(m)
	if s := e.sessionFor(&e.main, m); s != nil {
		s.count++
	}
	e.stats.sent.Add(1)
	if !m.scheduledAt.IsZero() {
		m.state = stScheduled
		e.main.heaps[hSched].add(m)
		e.stats.scheduled.Add(1)
		e.main.signal() // waiters recompute their next due time: this message may be it
		e.changed()
		return
	}
	e.makeAvailable(&e.main, m)
}

func (e *Entity) makeAvailable(sq *subqueue, m *message) {
	e.changed()
	m.state = stAvailable
	m.wasDeferred = false
	if s := e.sessionFor(sq, m); s != nil {
		s.avail.add(m)
		e.sessAvailLen++
		e.reindexSession(s)
	} else {
		sq.heaps[hAvail].add(m)
	}
	if m.expires && !sq.dlq {
		sq.heaps[hExp].add(m)
	}
	sq.signal()
}

// makeDeferred sets m aside. A deferred message does not expire while it waits: it is
// checked when a client receives it by sequence number ("Deferred messages aren't
// expired and automatically moved to a dead-letter queue until a client app attempts to
// receive them", Service Bus docs, message deferral).
func (e *Entity) makeDeferred(sq *subqueue, m *message) {
	m.state = stDeferred
	m.wasDeferred = false
}

// lock gives m (already out of the available/expiry heaps) to r under a new lock.
func (e *Entity) lock(sq *subqueue, m *message, r *Receiver, now time.Time) {
	e.changed()
	m.state = stLocked
	m.token = newLockToken()
	m.holder = r
	sq.byToken[m.token] = m
	if s := r.sess; s != nil {
		if s.locked == nil {
			s.locked = make(map[*message]struct{})
		}
		s.locked[m] = struct{}{}
		return // locked by the session's lock: it expires and is renewed with the session
	}
	m.lockedUntil = now.Add(e.opts.LockDuration)
	sq.heaps[hLock].add(m)
}

// unlock drops m's lock; the caller decides where m goes next.
func (e *Entity) unlock(sq *subqueue, m *message) {
	e.changed()
	sq.heaps[hLock].del(m)
	delete(sq.byToken, m.token)
	if m.holder != nil && m.holder.sess != nil {
		delete(m.holder.sess.locked, m)
	}
	m.holder = nil
	m.orphaned = false
	m.token = [16]byte{}
}

// detach removes m from sq entirely.
func (e *Entity) detach(sq *subqueue, m *message) {
	e.changed()
	if m.state == stLocked {
		e.unlock(sq, m)
	}
	for k := range sq.heaps {
		sq.heaps[k].del(m)
	}
	sq.drop(m)
	e.sessionGone(sq, m)
}

// release returns an unlocked message to where it came from. counted is true for an
// abandon or a lock expiry, which count a delivery ("Messages, payloads, and
// serialization"): in the main queue a message that has had MaxDeliveryCount counted
// deliveries goes to the dead-letter queue instead; the dead-letter queue counts none
// (SDK live test TestMessageSettlementUsingReceiver: abandoned there, DeliveryCount
// stays).
func (e *Entity) release(sq *subqueue, m *message, counted bool) {
	if counted && !sq.dlq {
		if m.count >= uint32(e.opts.MaxDeliveryCount) {
			e.detach(sq, m)
			e.toDLQ(m, ptr(MaxDeliveryCountExceededReason), ptr(fmt.Sprintf("Message could not be consumed after %d delivery attempts.", e.opts.MaxDeliveryCount)), nil)
			return
		}
		m.count++
	}
	e.requeue(sq, m)
}

func (e *Entity) requeue(sq *subqueue, m *message) {
	if m.wasDeferred {
		e.makeDeferred(sq, m)
		return
	}
	e.makeAvailable(sq, m)
}

// toDLQ puts a message already detached from the main queue into the dead-letter queue.
// reason and description may be nil (not set).
func (e *Entity) toDLQ(m *message, reason, desc *string, props map[string]any) {
	e.stats.deadLettered.Add(1)
	if !e.forwardDeadLetter(m, reason, desc, props) {
		e.deadLetterHere(m, reason, desc, props)
	}
}

// deadLetterHere puts a message detached from the main queue into e's own dead-letter
// queue, with its properties changed by props.
func (e *Entity) deadLetterHere(m *message, reason, desc *string, props map[string]any) {
	m.p = m.p.withProps(props)
	m.dlReason, m.dlDesc = cloneStr(reason), cloneStr(desc)
	e.dlq.put(m)
	e.makeAvailable(&e.dlq, m)
}

// orphanLocks marks every lock r holds as held by a link that is gone, as a closed
// receiver or a dropped connection leaves them: the broker keeps each lock until its
// LockedUntil ("Message transfers, locks, and settlement": when the client stops working,
// the message is available again only after the lock duration), any receiver of the
// entity can renew or settle it by its token meanwhile (SDK live test
// TestReceiver_SettleWithOnlyLockToken), and when it expires the message comes back
// without the delivery counted ("Messages, payloads, and serialization": the count does
// not increase when the AMQP connection closes). It costs O(locked messages).
func (e *Entity) orphanLocks(r *Receiver) {
	for _, m := range r.sq.byToken {
		if m.holder == r {
			m.orphaned = true
		}
	}
}

// Name returns the entity's path: the queue name, or "topic/Subscriptions/sub".
func (e *Entity) Name() string { return e.path }

// Options returns the entity's options with defaults filled in.
func (e *Entity) Options() EntityOptions {
	e.mu.Lock() // SetOptions may change them (manage.go)
	defer e.mu.Unlock()
	return e.opts
}

// Stats returns a snapshot of the entity's counters.
func (e *Entity) Stats() EntityStats { return e.stats.snapshot() }

// InjectFault adds a fault; faults for the same Op apply in the order injected. Faults
// for OpSend on a subscription never fire: inject them on the Topic.
func (e *Entity) InjectFault(f Fault) { e.faults.inject(f) }

// ClearFaults removes every injected fault.
func (e *Entity) ClearFaults() { e.faults.clear() }

// ExpireLock makes the lock with the given token lost now, as if it had expired: the
// message returns to the entity with its delivery counted (or goes to the dead-letter
// queue after MaxDeliveryCount deliveries). It reports whether the lock was held.
func (e *Entity) ExpireLock(lockToken [16]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	for _, sq := range []*subqueue{&e.main, &e.dlq} {
		if m := sq.byToken[lockToken]; m != nil {
			counted := !m.orphaned
			e.unlock(sq, m)
			e.stats.lockExpired.Add(1)
			e.release(sq, m, counted)
			return true
		}
	}
	return false
}

// snapshot returns received-message copies of the messages of sq that pass keep, in
// sequence-number order, after applying what is due.
func (e *Entity) snapshot(dlq bool, keep func(*message) bool) []*azservicebus.ReceivedMessage {
	e.ns.flushForwards()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tick(time.Now())
	sq := &e.main
	if dlq {
		sq = &e.dlq
	}
	return collect(sq, 0, -1, keep, 0)
}

// Active returns copies of the available messages, by sequence number.
func (e *Entity) Active() []*azservicebus.ReceivedMessage {
	return e.snapshot(false, func(m *message) bool { return m.state == stAvailable })
}

// Locked returns copies of the locked messages of the main queue, by sequence number.
func (e *Entity) Locked() []*azservicebus.ReceivedMessage {
	return e.snapshot(false, func(m *message) bool { return m.state == stLocked })
}

// Deferred returns copies of the deferred messages not currently locked, by sequence
// number.
func (e *Entity) Deferred() []*azservicebus.ReceivedMessage {
	return e.snapshot(false, func(m *message) bool { return m.state == stDeferred })
}

// Scheduled returns copies of the scheduled messages, by sequence number.
func (e *Entity) Scheduled() []*azservicebus.ReceivedMessage {
	return e.snapshot(false, func(m *message) bool { return m.state == stScheduled })
}

// DeadLetters returns copies of every message in the dead-letter queue, by sequence
// number, with DeadLetterReason and DeadLetterErrorDescription set.
func (e *Entity) DeadLetters() []*azservicebus.ReceivedMessage {
	return e.snapshot(true, func(*message) bool { return true })
}

func ptr[T any](v T) *T { return &v }
