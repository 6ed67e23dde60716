package sbtest

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sbkit/sbkit"
)

// Topic is a topic: every message sent to it is copied into each of its subscriptions
// (created before the send), with the same sequence number. Safe for concurrent use.
type Topic struct {
	ns     *Namespace
	name   string
	opts   EntityOptions
	faults faultSet
	stats  counters
	life   lifetime
	status statusCell // status.go

	mu     sync.Mutex
	subs   []*Entity
	seqs   atomic.Int64 // the last sequence number, shared by the subscriptions
	dup    dupDetector
	copies map[int64][]int64 // extra copies of scheduled messages made by action rules (rule.go)
	// accessed is when a message was last sent to the topic (AccessedAt, manage.go).
	accessed time.Time
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// NewSubscription creates a subscription of t. nil options mean defaults. Its messages'
// default TTL is sbkit.SubscriptionDefaultTTL(topic's, subscription's). Its rules are
// $Default (DefaultRuleName, the true filter), or EntityOptions.DefaultRule. Errors as
// for Namespace.NewQueue.
func (t *Topic) NewSubscription(name string, opts *EntityOptions) (*Entity, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	rules := []*rule{defaultRule()}
	if opts != nil && opts.DefaultRule != nil {
		r := *opts.DefaultRule
		if r.Name == "" {
			r.Name = DefaultRuleName
		}
		c, err := compileRule(r)
		if err != nil {
			return nil, err
		}
		rules = []*rule{c}
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	o.DuplicateDetectionWindow = 0
	path := subscriptionPath(t.name, name)
	t.ns.mu.Lock()
	defer t.ns.mu.Unlock()
	if t.ns.existsLocked(path) {
		return nil, fmt.Errorf("%w: %q", ErrExists, path)
	}
	t.mu.Lock() // t.opts may change (SetOptions): read it and join t.subs in one step
	defer t.mu.Unlock()
	e := newEntity(t.ns, path, t, o, sbkit.SubscriptionDefaultTTL(t.opts.DefaultTTL, o.DefaultTTL))
	e.rules.rules = rules   // before the subscription is visible: sends route by these from the start
	e.accessed = time.Now() // as the service reports a new subscription (SDK live test TestAdminClient_ListSubscriptionRuntimeProperties)
	t.ns.entities[path] = e
	t.ns.folded[foldKey(path)] = path
	t.subs = append(t.subs, e)
	return e, nil
}

// Subscriptions returns the topic's subscriptions in creation order.
func (t *Topic) Subscriptions() []*Entity {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*Entity(nil), t.subs...)
}

// Stats returns a snapshot of the topic's send counters.
func (t *Topic) Stats() EntityStats { return t.stats.snapshot() }

// InjectFault adds a fault to the topic; only OpSend faults apply to a topic.
func (t *Topic) InjectFault(f Fault) { t.faults.inject(f) }

// ClearFaults removes every fault injected into the topic.
func (t *Topic) ClearFaults() { t.faults.clear() }

func (t *Topic) sendFaults() *faultSet { return &t.faults }
func (t *Topic) sendStats() *counters  { return &t.stats }
func (t *Topic) lifespan() *lifetime   { return &t.life }

func (t *Topic) store(now time.Time, out []outgoing) []int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.accessed = now
	for _, s := range t.subs { // scheduled messages due by now take their numbers first
		s.mu.Lock()
		s.tick(now)
		s.mu.Unlock()
	}
	seqs := make([]int64, len(out))
	kept := out[:0:0]
	for i, o := range out {
		if !t.dup.accept(o.p.messageID, now) {
			t.stats.duplicates.Add(1)
			continue
		}
		seqs[i] = t.seqs.Add(1)
		o.seq = seqs[i]
		kept = append(kept, o)
		t.stats.sent.Add(1)
		if o.sched.After(now) {
			t.stats.scheduled.Add(1)
		}
	}
	for _, s := range t.subs {
		s.mu.Lock()
		s.tick(now)
		for _, o := range kept {
			copies, err := s.rules.route(o.p, o.seq)
			if err != nil {
				s.ruleFailed(o.p, o.seq, now, err)
				continue
			}
			for i, p := range copies {
				seq := o.seq
				if i > 0 { // each further copy an action rule makes is a message of its own
					seq = t.seqs.Add(1)
					t.noteCopy(o.seq, seq, o.sched.After(now))
				}
				s.insert(p, seq, now, o.sched)
			}
		}
		s.mu.Unlock()
	}
	return seqs
}

func (t *Topic) cancel(now time.Time, seqs []int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := make(map[int64]bool)
	all := t.withCopies(seqs)
	for _, s := range t.subs {
		s.mu.Lock()
		for _, seq := range s.cancelLocked(now, all) {
			found[seq] = true
		}
		s.mu.Unlock()
	}
	for seq := range found {
		if !slices.Contains(seqs, seq) {
			delete(found, seq) // a copy: its message is counted once
		}
	}
	t.stats.cancelled.Add(int64(len(found)))
}
