package sbtest

import (
	"fmt"
	"slices"
	"sync/atomic"

	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

// EntityStatus is the status of a queue, topic or subscription, as the administration
// API sets it ("Service Bus entity status": Active, Disabled, SendDisabled,
// ReceiveDisabled). The zero value means Active.
type EntityStatus string

// Entity statuses.
const (
	StatusActive          EntityStatus = "Active"
	StatusDisabled        EntityStatus = "Disabled"
	StatusSendDisabled    EntityStatus = "SendDisabled"
	StatusReceiveDisabled EntityStatus = "ReceiveDisabled"
)

var statuses = []EntityStatus{StatusActive, StatusDisabled, StatusSendDisabled, StatusReceiveDisabled}

// condEntityDisabled is the AMQP condition the service answers for an operation its
// entity's status forbids (modelerr.CondEntityDisabled).
const condEntityDisabled = modelerr.CondEntityDisabled

// statusCell holds an entity's status in the entity itself, so that nothing outlives a
// deleted entity. The zero value means Active. Safe for concurrent use.
type statusCell struct{ v atomic.Value } // of EntityStatus

// cellOf returns the status of obj, an *Entity or *Topic.
func cellOf(obj any) *statusCell {
	switch o := obj.(type) {
	case *Entity:
		return &o.status
	case *Topic:
		return &o.status
	}
	panic(fmt.Sprintf("sbtest: no status for %T", obj))
}

// setStatus records obj's status (an *Entity or *Topic).
func (ns *Namespace) setStatus(obj any, s EntityStatus) error {
	if s == "" {
		s = StatusActive
	}
	if !slices.Contains(statuses, s) {
		return fmt.Errorf("%w: status %q", ErrInvalidOptions, s)
	}
	cellOf(obj).v.Store(s)
	return nil
}

func (ns *Namespace) statusOf(obj any) EntityStatus {
	if s, ok := cellOf(obj).v.Load().(EntityStatus); ok {
		return s
	}
	return StatusActive
}

// checkStatus returns the service's error when obj's status forbids sending (send true)
// or receiving.
func (ns *Namespace) checkStatus(obj any, name string, send bool) error {
	s := ns.statusOf(obj)
	if s == StatusDisabled || send && s == StatusSendDisabled || !send && s == StatusReceiveDisabled {
		what := "receive"
		if send {
			what = "send"
		}
		return &goamqp.Error{Condition: condEntityDisabled, Description: fmt.Sprintf("Messaging entity '%s' is currently disabled (%s) for %s.", name, s, what)}
	}
	return nil
}

// SetStatus sets a queue's or subscription's status: Disabled refuses sends and
// receives, SendDisabled sends, ReceiveDisabled receives, with the service's
// com.microsoft:entity-disabled error. A subscription's SendDisabled status is reported
// only (messages reach it through its topic). Errors: ErrInvalidOptions.
func (e *Entity) SetStatus(s EntityStatus) error { return e.ns.setStatus(e, s) }

// Status returns the entity's status.
func (e *Entity) Status() EntityStatus { return e.ns.statusOf(e) }

// SetStatus sets a topic's status: Disabled and SendDisabled refuse sends to it.
func (t *Topic) SetStatus(s EntityStatus) error { return t.ns.setStatus(t, s) }

// Status returns the topic's status.
func (t *Topic) Status() EntityStatus { return t.ns.statusOf(t) }

// sendStatus checks the status of a Sender's target.
func (s *Sender) sendStatus() error {
	switch t := s.target.(type) {
	case *Entity:
		return s.ns.checkStatus(t, t.path, true)
	case *Topic:
		return s.ns.checkStatus(t, t.name, true)
	}
	return nil
}
