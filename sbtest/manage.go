package sbtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sbkit/sbkit"
)

// Entity management beyond creation: deleting, listing and reconfiguring queues,
// topics and subscriptions, as the administration API does (Server's admin API uses
// these; tests may call them directly).

// DeleteQueue removes a queue and its messages. It returns ErrNotFound when no queue has
// that name. From then on the Senders and Receivers already open on it fail with
// CodeNotFound (a queue created later with the same name is another queue), and the
// server detaches its links with amqp:not-found.
func (ns *Namespace) DeleteQueue(name string) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	e := ns.entities[ns.keyLocked(name)]
	if e == nil || e.topic != nil {
		return fmt.Errorf("%w: queue %q", ErrNotFound, name)
	}
	delete(ns.entities, e.path)
	ns.forgetLocked(e.path)
	e.life.end()
	return nil
}

// DeleteTopic removes a topic with its subscriptions. It returns ErrNotFound when no
// topic has that name. Senders and Receivers already open on them fail with CodeNotFound
// from then on, as for DeleteQueue.
func (ns *Namespace) DeleteTopic(name string) error {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	t := ns.topics[ns.keyLocked(name)]
	if t == nil {
		return fmt.Errorf("%w: topic %q", ErrNotFound, name)
	}
	delete(ns.topics, t.name)
	ns.forgetLocked(t.name)
	t.life.end()
	for _, s := range t.Subscriptions() {
		delete(ns.entities, s.path)
		ns.forgetLocked(s.path)
		s.life.end()
	}
	return nil
}

// DeleteSubscription removes a subscription of t. It returns ErrNotFound when t has no
// subscription of that name. Receivers already open on it fail with CodeNotFound from
// then on, as for DeleteQueue.
func (t *Topic) DeleteSubscription(name string) error {
	t.ns.mu.Lock()
	defer t.ns.mu.Unlock()
	path := t.ns.keyLocked(subscriptionPath(t.name, name))
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.IndexFunc(t.subs, func(e *Entity) bool { return e.path == path })
	if i < 0 {
		return fmt.Errorf("%w: subscription %q", ErrNotFound, path)
	}
	sub := t.subs[i]
	t.subs = slices.Delete(t.subs, i, i+1)
	delete(t.ns.entities, path)
	t.ns.forgetLocked(path)
	sub.life.end()
	return nil
}

// lifetime ends when its queue, topic or subscription is deleted: the clients of a
// deleted entity fail with CodeNotFound, and the server detaches its links with
// amqp:not-found, the service's MessagingEntityNotFound (Service Bus docs, "Service Bus
// messaging exceptions"), which the SDK reports without attaching again (azservicebus
// internal/errors.go, amqpConditionsToRecoveryKind). The zero value is a lifetime that
// has not ended. Safe for concurrent use.
type lifetime struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
}

func (l *lifetime) init() { l.ctx, l.cancel = context.WithCancel(context.Background()) }

// done returns a context that ends with the lifetime.
func (l *lifetime) done() context.Context {
	l.once.Do(l.init)
	return l.ctx
}

func (l *lifetime) end() {
	l.once.Do(l.init)
	l.cancel()
}

func (l *lifetime) ended() bool { return l.done().Err() != nil }

// Subscription returns the subscription of t with the given name.
func (t *Topic) Subscription(name string) (*Entity, bool) {
	return t.ns.Entity(subscriptionPath(t.name, name))
}

// Queues returns the namespace's queues sorted by name.
func (ns *Namespace) Queues() []*Entity {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var out []*Entity
	for _, e := range ns.entities {
		if e.topic == nil {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *Entity) int { return strings.Compare(a.path, b.path) })
	return out
}

// Topics returns the namespace's topics sorted by name.
func (ns *Namespace) Topics() []*Topic {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var out []*Topic
	for _, t := range ns.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Topic) int { return strings.Compare(a.name, b.name) })
	return out
}

// Topic returns the topic a subscription belongs to, or nil for a queue.
func (e *Entity) Topic() *Topic { return e.topic }

// SetOptions reconfigures a queue or subscription, as an administration update does.
// Locks taken from now on use the new LockDuration, deliveries counted from now on the
// new MaxDeliveryCount, messages sent from now on the new DefaultTTL; messages already
// stored keep their expiry. RequiresSession cannot change (the service refuses: "The
// value for the RequiresSession property of an existing Queue cannot be changed", SDK
// live test TestAdminClient_UpdateQueue). Errors: ErrInvalidOptions.
func (e *Entity) SetOptions(opts *EntityOptions) error {
	o, err := opts.normalize()
	if err != nil {
		return err
	}
	var topicTTL time.Duration
	if e.topic != nil {
		topicTTL = e.topic.Options().DefaultTTL // before e.mu: the lock order is topic, then subscription
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if o.RequiresSession != e.opts.RequiresSession {
		return fmt.Errorf("%w: the value for the RequiresSession property of an existing entity cannot be changed", ErrInvalidOptions)
	}
	if e.topic != nil {
		o.DuplicateDetectionWindow = 0
		e.defaultTTL = sbkit.SubscriptionDefaultTTL(topicTTL, o.DefaultTTL)
	} else {
		e.defaultTTL = o.DefaultTTL
		e.dup.window = o.DuplicateDetectionWindow
	}
	e.opts = o
	return nil
}

// Options returns the topic's options with defaults filled in.
func (t *Topic) Options() EntityOptions {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.opts
}

// SetOptions reconfigures a topic: DefaultTTL (which also caps its subscriptions'
// defaults from now on) and DuplicateDetectionWindow. Errors: ErrInvalidOptions.
func (t *Topic) SetOptions(opts *EntityOptions) error {
	o, err := opts.normalize()
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.opts = o
	t.dup.window = o.DuplicateDetectionWindow
	subs := slices.Clone(t.subs)
	t.mu.Unlock()
	for _, s := range subs {
		s.mu.Lock()
		s.defaultTTL = sbkit.SubscriptionDefaultTTL(o.DefaultTTL, s.opts.DefaultTTL)
		s.mu.Unlock()
	}
	return nil
}

// AccessedAt returns when a message last arrived at the entity or a receive from it was
// last asked for, or the zero time before either: the administration API's AccessedAt
// (the .NET SDK's QueueRuntimeProperties.AccessedAt, "the last time a message was sent or
// the last time there was a receive request"). A subscription's starts at its creation.
func (e *Entity) AccessedAt() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.accessed
}

// AccessedAt returns when a message was last sent to the topic, or the zero time (the
// .NET SDK's TopicRuntimeProperties.AccessedAt).
func (t *Topic) AccessedAt() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.accessed
}
