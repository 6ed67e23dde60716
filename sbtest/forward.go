package sbtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Auto-forwarding ("Chaining Service Bus entities with autoforwarding"): a queue or
// subscription with EntityOptions.ForwardTo passes every message that arrives in it on
// to that queue or topic; with ForwardDeadLetteredMessagesTo, every message it
// dead-letters goes there instead of its dead-letter queue, with DeadLetterSource set to
// the entity it was dead-lettered in ("Messages, payloads, and serialization"). A
// forwarded message carries EnqueuedSequenceNumber, the sequence number it got where it
// was first enqueued (same page). A message is forwarded at most MaxForwardHops times;
// one that arrives in a forwarding entity after that is dead-lettered there with reason
// ForwardHopsExceededReason ("Service Bus dead-letter queues": MaxTransferHopCountExceeded,
// "This value is set to 4").
//
// A message whose target is gone or refuses sends stays in the dead-letter queue of the
// entity that would have forwarded it ("Service Bus dead-letter queues", dead-lettering in
// auto forward scenarios: "The destination queue or topic is disabled or deleted"): with
// ForwardTargetUnavailableReason when it arrived to be forwarded, with its own reason when
// it was being dead-lettered to ForwardDeadLetteredMessagesTo. The target is looked up by
// name at each move, so one created again under the name receives again.
//
// The copies one sent message can multiply into through forwarding are bounded by
// NamespaceOptions.MaxForwardCopies (sbtest's own bound: the hop limit bounds the depth
// of a chain, not its breadth, and subscriptions forwarding back to their own topic
// would otherwise turn one send into 14^5 messages); a copy the bound stops stays in the
// dead-letter queue of the entity that would have forwarded it, with
// ForwardCopiesExceededReason.
//
// The move happens after the source's lock is released (so chains and cycles cannot
// deadlock): when the operation that put the message there returns — a send, a
// settlement, a receive or an inspection of the namespace's entities.

// MaxForwardHops is how many times one message can be auto-forwarded.
const MaxForwardHops = 4

// ForwardHopsExceededReason is the dead-letter reason of a message that would be
// forwarded more than MaxForwardHops times.
const ForwardHopsExceededReason = "MaxTransferHopCountExceeded"

// ForwardTargetUnavailableReason is the dead-letter reason of a message its entity could
// not forward because the ForwardTo queue or topic does not exist or its status is
// Disabled or SendDisabled; the description names the target and what is wrong with it.
// The service documents the dead-lettering but no reason text: this one is sbtest's.
const ForwardTargetUnavailableReason = "TransferDestinationUnavailable"

// ForwardCopiesExceededReason is the dead-letter reason of a message its entity did not
// forward because auto-forwarding had already stored NamespaceOptions.MaxForwardCopies
// copies of the message it was copied from (sbtest's own bound and reason).
const ForwardCopiesExceededReason = "MaxForwardCopiesExceeded"

// DefaultMaxForwardCopies is the default of NamespaceOptions.MaxForwardCopies: room for
// the two-level fan-out the autoforwarding documentation recommends (20 subscriptions
// chained to topics of 200 subscriptions each: 4,020 copies), with margin.
const DefaultMaxForwardCopies = 10000

// forwardQueue holds messages that left a forwarding entity and wait to be stored in
// their target, and the fan-out count of each sent message with copies on their way.
// Its lock is a leaf: nothing else is locked while it is held.
type forwardQueue struct {
	mu    sync.Mutex
	items []forwardItem
	roots map[*payload]*fanout // by the payload as it was sent (forwarded copies carry theirs)
}

// fanout counts the copies auto-forwarding stored of one sent message, wherever they
// went. refs counts its forward items not yet flushed; at zero it is forgotten.
type fanout struct {
	copies atomic.Int64
	refs   int      // guarded by forwardQueue.mu
	root   *payload // its key in forwardQueue.roots
}

// forwardItem is one message on its way: the copy to store, the name of the queue or
// topic to store it in, and its scheduled enqueue time (zero: at once); and, for when
// the target cannot take it, the entity it leaves and the message as that entity held it
// (dl: it was being dead-lettered, with reason, desc and props).
type forwardItem struct {
	p      *payload
	target string
	sched  time.Time

	src          *Entity
	m            *message
	dl           bool
	reason, desc *string
	props        map[string]any
}

// push queues it for the next flushForwards, counting it in the fan-out of from, the
// payload it is a copy of.
func (q *forwardQueue) push(from *payload, it forwardItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := from.fan
	if f == nil {
		if f = q.roots[from]; f == nil {
			if q.roots == nil {
				q.roots = make(map[*payload]*fanout)
			}
			f = &fanout{root: from}
			q.roots[from] = f
		}
	}
	f.refs++
	it.p.fan = f // it.p is a fresh copy nobody else sees yet
	q.items = append(q.items, it)
}

// take empties the queue and returns what it held, oldest first.
func (q *forwardQueue) take() []forwardItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// done records that it was flushed.
func (q *forwardQueue) done(it forwardItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f := it.p.fan
	if f.refs--; f.refs == 0 {
		delete(q.roots, f.root)
	}
}

// forwardOnInsert hands m, just built by insert, to e's ForwardTo target, and reports
// whether it did. Called with e.mu held.
func (e *Entity) forwardOnInsert(m *message, sched time.Time) bool {
	if e.opts.ForwardTo == "" || m.p.hops >= MaxForwardHops {
		return false
	}
	q := *m.p
	q.hops++
	if q.enqSeq == 0 {
		q.enqSeq = m.seq
	}
	e.ns.fwd.push(m.p, forwardItem{p: &q, target: e.opts.ForwardTo, sched: sched, src: e, m: m})
	return true
}

// forwardHopsExceeded dead-letters m, just built by insert, when e would forward it a
// hop too many, and reports whether it did. Called with e.mu held.
func (e *Entity) forwardHopsExceeded(m *message) bool {
	if e.opts.ForwardTo == "" || m.p.hops < MaxForwardHops {
		return false
	}
	e.stats.sent.Add(1)
	e.toDLQ(m, ptr(ForwardHopsExceededReason), ptr(fmt.Sprintf("The message was auto-forwarded %d times.", MaxForwardHops)), nil)
	return true
}

// forwardDeadLetter hands a message e dead-letters to its ForwardDeadLetteredMessagesTo
// target, and reports whether it did. Called with e.mu held.
func (e *Entity) forwardDeadLetter(m *message, reason, desc *string, props map[string]any) bool {
	if e.opts.ForwardDeadLetteredMessagesTo == "" || m.p.hops >= MaxForwardHops {
		return false
	}
	q := *m.p.withProps(props)
	q.hops++
	q.dlReason, q.dlDesc, q.dlSource = cloneStr(reason), cloneStr(desc), ptr(e.path)
	if q.enqSeq == 0 {
		q.enqSeq = m.seq
	}
	e.ns.fwd.push(m.p, forwardItem{p: &q, target: e.opts.ForwardDeadLetteredMessagesTo, src: e, m: m,
		dl: true, reason: cloneStr(reason), desc: cloneStr(desc), props: cloneProps(props)})
	return true
}

// flushForwards stores every message waiting in the forward queue in its target (which
// may queue it again, up to MaxForwardHops). Called with no entity lock held.
func (ns *Namespace) flushForwards() {
	for range MaxForwardHops + 1 {
		items := ns.fwd.take()
		if len(items) == 0 {
			return
		}
		for _, it := range items {
			ns.forward(it)
			ns.fwd.done(it)
		}
	}
}

// forward stores it in its target, or leaves it in its source's dead-letter queue when
// the target cannot take it or the fan-out bound is reached.
func (ns *Namespace) forward(it forwardItem) {
	target, why := ns.forwardTarget(it.target)
	reason := ForwardTargetUnavailableReason
	if target != nil {
		if ns.maxForwardCopies < 0 || it.p.fan.copies.Load() < int64(ns.maxForwardCopies) {
			target.store(time.Now(), []outgoing{{p: it.p, sched: it.sched}})
			return
		}
		reason = ForwardCopiesExceededReason
		why = fmt.Sprintf("Auto-forwarding already stored %d copies of the message (NamespaceOptions.MaxForwardCopies).", ns.maxForwardCopies)
	}
	it.src.keepUnforwarded(it, reason, why)
}

// forwardTarget returns the queue or topic called name when it takes messages, else nil
// and the reason why not.
func (ns *Namespace) forwardTarget(name string) (sendTarget, string) {
	var target sendTarget
	var obj any
	if t, ok := ns.Topic(name); ok {
		target, obj = t, t
	} else if e, ok := ns.Entity(name); ok && e.topic == nil {
		target, obj = e, e
	} else {
		return nil, fmt.Sprintf("The transfer destination entity '%s' does not exist.", name)
	}
	if s := ns.statusOf(obj); s == StatusDisabled || s == StatusSendDisabled {
		return nil, fmt.Sprintf("The transfer destination entity '%s' is disabled (%s).", name, s)
	}
	return target, ""
}

// keepUnforwarded puts the message of it, which e could not forward, into e's own
// dead-letter queue: a dead-lettered message with its own reason, a message that
// arrived to be forwarded with reason and desc.
func (e *Entity) keepUnforwarded(it forwardItem, reason, desc string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if it.dl {
		e.deadLetterHere(it.m, it.reason, it.desc, it.props) // counted when it was dead-lettered
		return
	}
	e.stats.sent.Add(1)
	e.stats.deadLettered.Add(1)
	e.deadLetterHere(it.m, &reason, &desc, nil)
}

// countForwarded counts p in its fan-out when it arrived through forwarding. Called with
// the lock of the entity p arrives in held.
func (p *payload) countForwarded() {
	if p.fan != nil {
		p.fan.copies.Add(1)
	}
}

// setForwarded fills the fields a forwarded message carries.
func (p *payload) setForwarded(rm *azservicebus.ReceivedMessage) {
	rm.DeadLetterSource = cloneStr(p.dlSource)
	if p.enqSeq != 0 {
		rm.EnqueuedSequenceNumber = ptr(p.enqSeq)
	}
	if rm.DeadLetterReason == nil && rm.DeadLetterErrorDescription == nil {
		rm.DeadLetterReason, rm.DeadLetterErrorDescription = cloneStr(p.dlReason), cloneStr(p.dlDesc)
	}
}

// forwarded are the fields of a payload that auto-forwarding sets.
type forwarded struct {
	hops             int
	enqSeq           int64
	dlSource         *string
	dlReason, dlDesc *string
	fan              *fanout // the fan-out of the sent message this is a copy of
}
