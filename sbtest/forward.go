package sbtest

import (
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Auto-forwarding ("Chaining Service Bus entities with autoforwarding"): a queue or
// subscription with EntityOptions.ForwardTo passes every message that arrives in it on
// to that queue or topic; with ForwardDeadLetteredMessagesTo, every message it
// dead-letters goes there instead of its dead-letter queue, with DeadLetterSource set to
// the entity it was dead-lettered in (seed 004). A forwarded message carries
// EnqueuedSequenceNumber, the sequence number it got where it was first enqueued (seed
// 004). A message is forwarded at most MaxForwardHops times; one that arrives in a
// forwarding entity after that is dead-lettered there with reason
// ForwardHopsExceededReason (the 4-hop limit and the dead-lettering are from "Service Bus
// autoforwarding" write-ups, the reason text is sbtest's own).
//
// The move happens after the source's lock is released (so chains and cycles cannot
// deadlock): when the operation that put the message there returns — a send, a
// settlement, a receive or an inspection of the namespace's entities.

// MaxForwardHops is how many times one message can be auto-forwarded.
const MaxForwardHops = 4

// ForwardHopsExceededReason is the dead-letter reason of a message that would be
// forwarded more than MaxForwardHops times.
const ForwardHopsExceededReason = "MaxTransferHopCountExceeded"

// forwardQueue holds messages that left a forwarding entity and wait to be stored in
// their target. Its lock is a leaf: nothing else is locked while it is held.
type forwardQueue struct {
	mu    sync.Mutex
	items []forwardItem
}

// forwardItem is one message on its way: the copy to store, the name of the queue or
// topic to store it in, and its scheduled enqueue time (zero: at once).
type forwardItem struct {
	p      *payload
	target string
	sched  time.Time
}

// push queues it for the next flushForwards.
func (q *forwardQueue) push(it forwardItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
}

// take empties the queue and returns what it held, oldest first.
func (q *forwardQueue) take() []forwardItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	items := q.items
	q.items = nil
	return items
}

// forwardOnInsert hands a message arriving in e (sequence number seq there) to its
// ForwardTo target, and reports whether it did. Called with e.mu held.
func (e *Entity) forwardOnInsert(p *payload, seq int64, sched time.Time) bool {
	if e.opts.ForwardTo == "" || p.hops >= MaxForwardHops {
		return false
	}
	q := *p
	q.hops++
	if q.enqSeq == 0 {
		q.enqSeq = seq
	}
	e.ns.fwd.push(forwardItem{p: &q, target: e.opts.ForwardTo, sched: sched})
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
	e.stats.deadLettered.Add(1)
	e.ns.fwd.push(forwardItem{p: &q, target: e.opts.ForwardDeadLetteredMessagesTo})
	return true
}

// flushForwards stores every message waiting in the forward queue in its target (which
// may queue it again, up to MaxForwardHops). A message whose target no longer exists is
// dropped. Called with no entity lock held.
func (ns *Namespace) flushForwards() {
	for range MaxForwardHops + 1 {
		items := ns.fwd.take()
		if len(items) == 0 {
			return
		}
		for _, it := range items {
			var target sendTarget
			if t, ok := ns.Topic(it.target); ok {
				target = t
			} else if e, ok := ns.Entity(it.target); ok && e.topic == nil {
				target = e
			}
			if target != nil {
				target.store(time.Now(), []outgoing{{p: it.p, sched: it.sched}})
			}
		}
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
}
