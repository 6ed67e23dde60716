package sbtest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
	"github.com/sbkit/sbkit/sbtest/internal/explorer"
)

// The explorer (sbtest/internal/explorer) is served beside the administration API on
// the plain-HTTP listener (ServerOptions.AdminHTTPAddr), as sbemulator's port 5300, and
// sees the Namespace through this adapter, which uses only the model's exported API:
// the administration API's adapter for the entities, and receivers, senders, session
// receivers and peeks for the messages, so that it does only what a client can do.

// explorerModel is the explorer.Model of a Namespace.
type explorerModel struct{ adminModel }

var _ explorer.Model = explorerModel{}

// entityAt returns the queue or subscription at path, or the API's ErrNotFound.
func (m explorerModel) entityAt(path string) (*Entity, error) {
	e, ok := m.ns.Entity(path)
	if !ok {
		return nil, fmt.Errorf("%w: no queue or subscription %q", adminapi.ErrNotFound, path)
	}
	return e, nil
}

// Browse peeks through a receiver of the entity, as the SDK's PeekMessages does. The
// main queue of an entity that requires sessions is read by session receivers only,
// and accepting a session would lock it; it is read from the inspection snapshots
// instead (Active, Locked, Deferred, Scheduled), which lock nothing either and cost
// O(messages) per call.
func (m explorerModel) Browse(ctx context.Context, path string, dlq bool, from int64, max int) ([]*azservicebus.ReceivedMessage, error) {
	e, err := m.entityAt(path)
	if err != nil {
		return nil, err
	}
	if !dlq && e.Options().RequiresSession {
		return sessionSnapshot(e, from, max), nil
	}
	r, err := m.receiverFor(e, dlq, azservicebus.ReceiveModePeekLock)
	if err != nil {
		return nil, err
	}
	defer r.Close(ctx)
	return r.PeekMessages(ctx, max, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &from})
}

// sessionSnapshot returns up to max messages of e's main queue from sequence number
// from on, in order, without lock tokens, as a peek shows them.
func sessionSnapshot(e *Entity, from int64, max int) []*azservicebus.ReceivedMessage {
	var all []*azservicebus.ReceivedMessage
	for _, ms := range [][]*azservicebus.ReceivedMessage{e.Active(), e.Locked(), e.Deferred(), e.Scheduled()} {
		for _, rm := range ms {
			if *rm.SequenceNumber >= from {
				rm.LockToken, rm.LockedUntil = [16]byte{}, nil
				all = append(all, rm)
			}
		}
	}
	slices.SortFunc(all, func(a, b *azservicebus.ReceivedMessage) int {
		return int(*a.SequenceNumber - *b.SequenceNumber)
	})
	if len(all) > max {
		all = all[:max]
	}
	return all
}

// receiverFor returns a receiver of e's main or dead-letter queue in mode.
func (m explorerModel) receiverFor(e *Entity, dlq bool, mode azservicebus.ReceiveMode) (*Receiver, error) {
	o := &ReceiverOptions{ReceiveMode: mode}
	if dlq {
		o.SubQueue = azservicebus.SubQueueDeadLetter
	}
	if t := e.Topic(); t != nil {
		_, sub, _ := strings.Cut(e.Name(), "/Subscriptions/")
		return m.ns.NewReceiverForSubscription(t.Name(), sub, o)
	}
	return m.ns.NewReceiverForQueue(e.Name(), o)
}

func (m explorerModel) NewReceiver(path string, dlq bool, mode azservicebus.ReceiveMode) (explorer.Receiver, error) {
	e, err := m.entityAt(path)
	if err != nil {
		return nil, err
	}
	return m.receiverFor(e, dlq, mode)
}

func (m explorerModel) AcceptSession(ctx context.Context, path, sessionID string, mode azservicebus.ReceiveMode) (explorer.Receiver, error) {
	e, err := m.entityAt(path)
	if err != nil {
		return nil, err
	}
	o := &SessionReceiverOptions{ReceiveMode: mode}
	if t := e.Topic(); t != nil {
		_, sub, _ := strings.Cut(e.Name(), "/Subscriptions/")
		return m.ns.AcceptSessionForSubscription(ctx, t.Name(), sub, sessionID, o)
	}
	return m.ns.AcceptSessionForQueue(ctx, e.Name(), sessionID, o)
}

func (m explorerModel) NewSender(name string) (explorer.Sender, error) {
	s, err := m.ns.NewSender(name, nil)
	if err != nil {
		return nil, adminErr(err)
	}
	return s, nil
}

func (m explorerModel) Sessions(path string) []string {
	e, ok := m.ns.Entity(path)
	if !ok {
		return nil
	}
	var ids []string
	for _, s := range e.Sessions() {
		if s.Messages > 0 {
			ids = append(ids, s.ID)
		}
	}
	return ids
}
