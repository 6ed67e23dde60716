package sbtest

import (
	"errors"
	"fmt"
	"time"
	"weak"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
)

// The administration API (sbtest/internal/admin) sees a Namespace through this adapter,
// which uses only the model's exported API: what the API can do to a namespace, any
// program can do with sbtest. It converts the options, counts and statuses, and marks
// the model's ErrNotFound and ErrExists with the API's, which it answers with 404 and
// 409.

// adminModel is the adminapi.Model of a Namespace.
type adminModel struct{ ns *Namespace }

// adminEntity is the adminapi.Entity of a queue or subscription; adminTopic the
// adminapi.Topic of a topic. Both compare equal when they hold the same entity.
type (
	adminEntity struct{ e *Entity }
	adminTopic  struct{ t *Topic }
)

var (
	_ adminapi.Model  = adminModel{}
	_ adminapi.Entity = adminEntity{}
	_ adminapi.Topic  = adminTopic{}
)

// adminErr marks the model's ErrNotFound and ErrExists in err with the API's.
func adminErr(err error) error {
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", adminapi.ErrNotFound, err)
	case errors.Is(err, ErrExists):
		return fmt.Errorf("%w: %w", adminapi.ErrExists, err)
	}
	return err
}

// ID is a weak pointer to the entity: it compares equal for the same entity only and
// does not keep a deleted one, with its messages, alive.
func (a adminEntity) ID() any { return weak.Make(a.e) }

// ID as for an adminEntity.
func (a adminTopic) ID() any { return weak.Make(a.t) }

// entityOptions converts the API's options into the model's; they have the same fields.
func entityOptions(o *adminapi.Options) *EntityOptions { return (*EntityOptions)(o) }

func (m adminModel) Queue(name string) (adminapi.Entity, bool) {
	e, ok := m.ns.Entity(name)
	if !ok || e.Topic() != nil {
		return nil, false
	}
	return adminEntity{e}, true
}

func (m adminModel) Topic(name string) (adminapi.Topic, bool) {
	t, ok := m.ns.Topic(name)
	if !ok {
		return nil, false
	}
	return adminTopic{t}, true
}

func (m adminModel) Queues() []adminapi.Entity { return adminEntities(m.ns.Queues()) }

func (m adminModel) Topics() []adminapi.Topic {
	ts := m.ns.Topics()
	out := make([]adminapi.Topic, len(ts))
	for i, t := range ts {
		out[i] = adminTopic{t}
	}
	return out
}

func (m adminModel) Entities() int { return len(m.ns.Queues()) + len(m.ns.Topics()) }

func (m adminModel) NewQueue(name string, o *adminapi.Options) (adminapi.Entity, error) {
	e, err := m.ns.NewQueue(name, entityOptions(o))
	if err != nil {
		return nil, adminErr(err)
	}
	return adminEntity{e}, nil
}

func (m adminModel) NewTopic(name string, o *adminapi.Options) (adminapi.Topic, error) {
	t, err := m.ns.NewTopic(name, entityOptions(o))
	if err != nil {
		return nil, adminErr(err)
	}
	return adminTopic{t}, nil
}

func (m adminModel) DeleteQueue(name string) error { return adminErr(m.ns.DeleteQueue(name)) }
func (m adminModel) DeleteTopic(name string) error { return adminErr(m.ns.DeleteTopic(name)) }

func adminEntities(es []*Entity) []adminapi.Entity {
	out := make([]adminapi.Entity, len(es))
	for i, e := range es {
		out[i] = adminEntity{e}
	}
	return out
}

func (a adminEntity) Name() string                         { return a.e.Name() }
func (a adminEntity) Options() adminapi.Options            { return adminapi.Options(a.e.Options()) }
func (a adminEntity) SetOptions(o *adminapi.Options) error { return a.e.SetOptions(entityOptions(o)) }
func (a adminEntity) Status() string                       { return string(a.e.Status()) }
func (a adminEntity) SetStatus(s string) error             { return a.e.SetStatus(EntityStatus(s)) }
func (a adminEntity) Counts() adminapi.Counts              { return adminapi.Counts(a.e.Counts()) }
func (a adminEntity) AccessedAt() time.Time                { return a.e.AccessedAt() }

func (a adminEntity) Rule(name string) (admin.RuleProperties, bool) { return a.e.Rule(name) }
func (a adminEntity) Rules() []admin.RuleProperties                 { return a.e.Rules() }
func (a adminEntity) CreateRule(r admin.RuleProperties) error       { return adminErr(a.e.CreateRule(r)) }
func (a adminEntity) UpdateRule(r admin.RuleProperties) error       { return adminErr(a.e.UpdateRule(r)) }
func (a adminEntity) DeleteRule(name string) error                  { return adminErr(a.e.DeleteRule(name)) }

func (a adminTopic) Name() string                         { return a.t.Name() }
func (a adminTopic) Options() adminapi.Options            { return adminapi.Options(a.t.Options()) }
func (a adminTopic) SetOptions(o *adminapi.Options) error { return a.t.SetOptions(entityOptions(o)) }
func (a adminTopic) Status() string                       { return string(a.t.Status()) }
func (a adminTopic) SetStatus(s string) error             { return a.t.SetStatus(EntityStatus(s)) }
func (a adminTopic) AccessedAt() time.Time                { return a.t.AccessedAt() }

func (a adminTopic) Subscription(name string) (adminapi.Entity, bool) {
	e, ok := a.t.Subscription(name)
	if !ok {
		return nil, false
	}
	return adminEntity{e}, true
}

func (a adminTopic) Subscriptions() []adminapi.Entity { return adminEntities(a.t.Subscriptions()) }

func (a adminTopic) NewSubscription(name string, o *adminapi.Options) (adminapi.Entity, error) {
	e, err := a.t.NewSubscription(name, entityOptions(o))
	if err != nil {
		return nil, adminErr(err)
	}
	return adminEntity{e}, nil
}

func (a adminTopic) DeleteSubscription(name string) error {
	return adminErr(a.t.DeleteSubscription(name))
}
