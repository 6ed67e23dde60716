package sbtest

import (
	"fmt"
	"strings"
	"sync"
)

// NamespaceOptions configures a Namespace. The zero value (and nil) means defaults.
type NamespaceOptions struct {
	// Latency is the initial latency model; the zero value means no latency.
	Latency Latency
	// MaxMessageSize is the largest message (sbkit.MessageSize) and the largest batch a send
	// accepts, in bytes; default DefaultMaxMessageSize (256 KiB).
	MaxMessageSize int
	// MaxForwardCopies bounds the copies auto-forwarding stores of one sent message, in
	// every queue and subscription it reaches; default DefaultMaxForwardCopies (10,000),
	// negative means unlimited. A copy past the bound is dead-lettered where it would have
	// been forwarded from, with ForwardCopiesExceededReason (forward.go). The bound is
	// sbtest's own: the service limits the depth of a chain (MaxForwardHops), not its
	// breadth, and a topic whose subscriptions forward back to it multiplies every send.
	MaxForwardCopies int
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

	fwd    forwardQueue // messages on their way to an auto-forwarding target (forward.go)
	status sync.Map     // *Entity or *Topic -> EntityStatus (status.go); absent means Active
}

// NewNamespace returns an empty namespace. nil options mean defaults.
func NewNamespace(opts *NamespaceOptions) *Namespace {
	var o NamespaceOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.MaxForwardCopies == 0 {
		o.MaxForwardCopies = DefaultMaxForwardCopies
	}
	ns := &Namespace{
		maxSize:          o.MaxMessageSize,
		maxForwardCopies: o.MaxForwardCopies,
		entities:         make(map[string]*Entity),
		topics:           make(map[string]*Topic),
	}
	ns.SetLatency(o.Latency)
	return ns
}

// SetLatency replaces the latency model. Operations already sleeping finish with the model
// they started with. Negative durations count as zero.
func (ns *Namespace) SetLatency(l Latency) { ns.latency.p.Store(newLatencyState(l)) }

// Latency returns the current latency model.
func (ns *Namespace) Latency() Latency { return ns.latency.get().Latency }

// MaxMessageSize returns the namespace's message and batch size limit in bytes.
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
// ErrExists, so at most one matches. A miss costs one pass over the entities. Called
// with ns.mu held.
func (ns *Namespace) keyLocked(path string) string {
	if ns.entities[path] != nil || ns.topics[path] != nil {
		return path
	}
	for p := range ns.entities {
		if strings.EqualFold(p, path) {
			return p
		}
	}
	for p := range ns.topics {
		if strings.EqualFold(p, path) {
			return p
		}
	}
	return path
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
