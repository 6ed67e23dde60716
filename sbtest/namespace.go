package sbtest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// NamespaceOptions configures a Namespace. The zero value (and nil) means defaults.
type NamespaceOptions struct {
	// Latency is the initial latency model; the zero value means no latency.
	Latency Latency
	// MaxMessageSize is the largest message (sbkit.MessageSize) and the largest batch a send
	// accepts, in bytes; default DefaultMaxMessageSize (256 KiB), negative means no limit
	// (a Server still refuses a delivery of more than 100 MiB, the service's largest
	// message).
	MaxMessageSize int
	// MaxForwardCopies bounds the copies auto-forwarding stores of one sent message, in
	// every queue and subscription it reaches; default DefaultMaxForwardCopies (10,000),
	// negative means unlimited. A copy past the bound is dead-lettered where it would have
	// been forwarded from, with ForwardCopiesExceededReason (forward.go). The bound is
	// sbtest's own: the service limits the depth of a chain (MaxForwardHops), not its
	// breadth, and a topic whose subscriptions forward back to it multiplies every send.
	MaxForwardCopies int
	// Queues are created in the new namespace, by name, with their options (nil means
	// defaults).
	Queues map[string]*EntityOptions
	// Topics are created in the new namespace, by name, with their subscriptions.
	Topics map[string]TopicOptions
}

// TopicOptions declares a topic and its subscriptions, for NamespaceOptions.Topics and
// ServerOptions.Topics.
type TopicOptions struct {
	// Options are the topic's options; nil means defaults.
	Options *EntityOptions
	// Subscriptions maps subscription names to their options (nil means defaults).
	Subscriptions map[string]*EntityOptions
}

// Namespace is an in-memory Service Bus namespace: a set of queues and topics with their
// subscriptions, and the latency model of talking to them. It plays the part of
// *azservicebus.Client. The zero value is not usable; call NewNamespace. Safe for
// concurrent use. A Namespace owns no goroutines and needs no Close.
type Namespace struct {
	latency          latencyModel
	maxSize          int
	maxForwardCopies int

	mu       sync.Mutex
	entities map[string]*Entity // queues and subscriptions by path
	topics   map[string]*Topic
	folded   map[string]string // the paths of entities and topics by foldKey

	fwd forwardQueue // messages on their way to an auto-forwarding target (forward.go)
}

// NewNamespace returns a namespace with the queues and topics of opts; nil options mean
// an empty one with defaults. It panics when an entity of opts cannot be created (a bad
// name or options, or two names that differ only in letter case), as httptest.NewServer
// panics when it cannot listen: in a test, NewTestNamespace fails the test instead.
func NewNamespace(opts *NamespaceOptions) *Namespace {
	ns, err := newNamespace(opts)
	if err != nil {
		panic(err)
	}
	return ns
}

// NewTestNamespace returns NewNamespace(opts) for the test tb, failing it when an
// entity of opts cannot be created. A Namespace owns no goroutines: there is nothing to
// clean up.
func NewTestNamespace(tb testing.TB, opts *NamespaceOptions) *Namespace {
	tb.Helper()
	ns, err := newNamespace(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return ns
}

func newNamespace(opts *NamespaceOptions) (*Namespace, error) {
	var o NamespaceOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.MaxMessageSize == 0:
		o.MaxMessageSize = DefaultMaxMessageSize
	case o.MaxMessageSize < 0:
		o.MaxMessageSize = math.MaxInt
	}
	if o.MaxForwardCopies == 0 {
		o.MaxForwardCopies = DefaultMaxForwardCopies
	}
	ns := &Namespace{
		maxSize:          o.MaxMessageSize,
		maxForwardCopies: o.MaxForwardCopies,
		entities:         make(map[string]*Entity),
		topics:           make(map[string]*Topic),
		folded:           make(map[string]string),
	}
	ns.SetLatency(o.Latency)
	if err := ns.declare(o.Queues, o.Topics); err != nil {
		return nil, fmt.Errorf("sbtest: NewNamespace: %w", err)
	}
	return ns, nil
}

// declare creates queues and topics with their subscriptions, in the order of their
// names.
func (ns *Namespace) declare(queues map[string]*EntityOptions, topics map[string]TopicOptions) error {
	for _, name := range slices.Sorted(maps.Keys(queues)) {
		if _, err := ns.NewQueue(name, queues[name]); err != nil {
			return fmt.Errorf("queue %q: %w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(topics)) {
		to := topics[name]
		t, err := ns.NewTopic(name, to.Options)
		if err != nil {
			return fmt.Errorf("topic %q: %w", name, err)
		}
		for _, sub := range slices.Sorted(maps.Keys(to.Subscriptions)) {
			if _, err := t.NewSubscription(sub, to.Subscriptions[sub]); err != nil {
				return fmt.Errorf("subscription %q of topic %q: %w", sub, name, err)
			}
		}
	}
	return nil
}

// SetLatency replaces the latency model. Operations already sleeping finish with the model
// they started with. Negative durations count as zero.
func (ns *Namespace) SetLatency(l Latency) { ns.latency.p.Store(newLatencyState(l)) }

// Latency returns the current latency model.
func (ns *Namespace) Latency() Latency { return ns.latency.get().Latency }

// MaxMessageSize returns the namespace's message and batch size limit in bytes,
// math.MaxInt when it has none.
func (ns *Namespace) MaxMessageSize() int { return ns.maxSize }

func validName(name string) error {
	if name == "" || strings.Contains(name, "/Subscriptions/") {
		return fmt.Errorf("%w: bad entity name %q", ErrInvalidOptions, name)
	}
	return nil
}

// NewQueue creates a queue. nil options mean defaults. It returns ErrInvalidOptions for
// bad options or an empty name and ErrExists when a queue or topic has that name.
func (ns *Namespace) NewQueue(name string, opts *EntityOptions) (*Entity, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.existsLocked(name) {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	e := newEntity(ns, name, nil, o, o.DefaultTTL)
	ns.entities[name] = e
	ns.folded[foldKey(name)] = name
	return e, nil
}

// NewTopic creates a topic. nil options mean defaults; only DefaultTTL and
// DuplicateDetectionWindow matter on a topic. Errors as for NewQueue.
func (ns *Namespace) NewTopic(name string, opts *EntityOptions) (*Topic, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	o, err := opts.normalize()
	if err != nil {
		return nil, err
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.existsLocked(name) {
		return nil, fmt.Errorf("%w: %q", ErrExists, name)
	}
	t := &Topic{ns: ns, name: name, opts: o}
	t.dup.window = o.DuplicateDetectionWindow
	ns.topics[name] = t
	ns.folded[foldKey(name)] = name
	return t, nil
}

// Entity returns the queue or subscription at path: "queue" or
// "topic/Subscriptions/sub", in any letter case.
func (ns *Namespace) Entity(path string) (*Entity, bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	e, ok := ns.entities[ns.keyLocked(path)]
	return e, ok
}

// Topic returns the topic with the given name, in any letter case.
func (ns *Namespace) Topic(name string) (*Topic, bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	t, ok := ns.topics[ns.keyLocked(name)]
	return t, ok
}

// keyLocked returns the path under which ns keeps the queue, topic or subscription that
// path names: path itself, or the one equal to it when letter case is ignored, as the
// service ignores it ("Naming rules and restrictions for Azure resources": resource
// names are case-insensitive). A name that differs from an existing one only in case is
// ErrExists, so at most one matches. A lookup is a map access whatever the number of
// entities (ns.folded). Called with ns.mu held.
func (ns *Namespace) keyLocked(path string) string {
	if ns.entities[path] != nil || ns.topics[path] != nil {
		return path
	}
	if p, ok := ns.folded[foldKey(path)]; ok {
		return p
	}
	return path
}

// foldKey is the same for two paths exactly when strings.EqualFold says they are equal:
// each rune is replaced by the smallest rune of its Unicode simple case-folding orbit.
func foldKey(path string) string {
	var b strings.Builder
	b.Grow(len(path))
	for _, r := range path {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// forgetLocked removes path, a queue's, topic's or subscription's, from ns.folded.
// Called with ns.mu held.
func (ns *Namespace) forgetLocked(path string) {
	delete(ns.folded, foldKey(path))
}

// existsLocked reports whether path names a queue, topic or subscription in any letter
// case. Called with ns.mu held.
func (ns *Namespace) existsLocked(path string) bool {
	k := ns.keyLocked(path)
	return ns.entities[k] != nil || ns.topics[k] != nil
}

func subscriptionPath(topic, sub string) string { return topic + "/Subscriptions/" + sub }

// exists reports whether path names a queue, a topic or a subscription.
func (ns *Namespace) exists(path string) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.existsLocked(path)
}
