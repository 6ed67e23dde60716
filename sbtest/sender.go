package sbtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// Sender sends to a queue or topic of a Namespace, like [*azservicebus.Sender]. It satisfies
// [sbkit.BatchSender]. Safe for concurrent use; every call is served in parallel with the
// others, each sleeping the namespace's Latency.
//
// Errors: [sbkit.ErrNilMessage] for a nil message; [azservicebus.ErrMessageTooLarge] (wrapped)
// for a message or batch above MaxMessageSize; [*azservicebus.Error] with CodeClosed after
// Close; ctx.Err() when ctx ends first (nothing is stored then); injected faults.
type Sender struct {
	ns     *Namespace
	name   string
	target sendTarget
	closed atomic.Bool
}

var _ sbkit.BatchSender = (*Sender)(nil)

// NewSender returns a sender for the queue or topic named queueOrTopic, or an
// [*azservicebus.Error] with CodeNotFound when there is none. options is the SDK's and may
// be nil; its Identifier names nothing in sbtest, so it is accepted and ignored.
func (ns *Namespace) NewSender(queueOrTopic string, options *azservicebus.NewSenderOptions) (*Sender, error) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	var target sendTarget
	key := ns.keyLocked(queueOrTopic)
	if t := ns.topics[key]; t != nil {
		target = t
	} else if e := ns.entities[key]; e != nil && e.topic == nil {
		target = e
	} else {
		return nil, errNotFound()
	}
	return &Sender{ns: ns, name: queueOrTopic, target: target}, nil
}

// Close closes the sender; later calls fail with CodeClosed. Safe to call twice.
func (s *Sender) Close(ctx context.Context) error {
	s.closed.Store(true)
	return nil
}

func (s *Sender) prepare(m *azservicebus.Message, sched time.Time) (outgoing, error) {
	if m == nil {
		return outgoing{}, sbkit.ErrNilMessage
	}
	if m.SessionID == nil && requiresSession(s.target) {
		return outgoing{}, errSessionRequiredForSend()
	}
	p := newPayload(m)
	if p.size > s.ns.maxSize {
		return outgoing{}, fmt.Errorf("sbtest: message of %d bytes, limit %d: %w", p.size, s.ns.maxSize, azservicebus.ErrMessageTooLarge)
	}
	if sched.IsZero() && m.ScheduledEnqueueTime != nil {
		sched = *m.ScheduledEnqueueTime
	}
	return outgoing{p: p, sched: sched}, nil
}

// do runs one send request of out: the latency model's wait, then sendNow.
func (s *Sender) do(ctx context.Context, out []outgoing, batch bool) ([]int64, error) {
	if s.closed.Load() {
		return nil, errClosed()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.admit(); err != nil {
		return nil, err
	}
	defer s.enter(out)()
	if err := s.ns.latency.store(ctx); err != nil {
		return nil, err
	}
	return s.sendNow(ctx, out, batch)
}

// admit reports why s may not send now: closed, its target deleted (CodeNotFound) or
// disabled for sending.
func (s *Sender) admit() error {
	if s.closed.Load() {
		return errClosed()
	}
	if s.target.lifespan().ended() {
		return errNotFound()
	}
	return s.sendStatus()
}

// enter counts a send request of out in flight; the returned func counts it out.
func (s *Sender) enter(out []outgoing) (leave func()) {
	var bytes int64
	for _, o := range out {
		bytes += int64(o.p.size)
	}
	return s.target.sendStats().enter(bytes)
}

// sendNow applies one send request at once, without the latency model's wait: admit,
// the target's fault for OpSend, the store. ctx ends a hanging fault only. The server
// waits for many requests at once and applies each with sendNow in the order they
// arrived, so that their sequence numbers follow that order (Service Bus docs, "Message
// sequencing and timestamps": the sequence number is the true order of arrival).
func (s *Sender) sendNow(ctx context.Context, out []outgoing, batch bool) ([]int64, error) {
	if err := s.admit(); err != nil {
		return nil, err
	}
	f, faulty := s.target.sendFaults().take(OpSend)
	if faulty {
		if err := f.before(ctx); err != nil {
			return nil, err
		}
	}
	seqs := s.target.store(time.Now(), out)
	s.ns.flushForwards() // auto-forwarding entities pass what they got on
	if batch {
		s.target.sendStats().batches.Add(1)
	}
	if faulty {
		return seqs, f.Err
	}
	return seqs, nil
}

// SendMessage sends one message. A ScheduledEnqueueTime in the future makes it a scheduled
// message. options may be nil.
func (s *Sender) SendMessage(ctx context.Context, message *azservicebus.Message, options *azservicebus.SendMessageOptions) error {
	o, err := s.prepare(message, time.Time{})
	if err != nil {
		return err
	}
	_, err = s.do(ctx, []outgoing{o}, false)
	return err
}

// ScheduleMessages stores messages to become active at scheduledEnqueueTime (at once if
// it is not in the future) and returns their sequence numbers, in order. The request is
// all or nothing. A duplicate dropped by duplicate detection gets sequence number 0.
func (s *Sender) ScheduleMessages(ctx context.Context, messages []*azservicebus.Message, scheduledEnqueueTime time.Time, options *azservicebus.ScheduleMessagesOptions) ([]int64, error) {
	out := make([]outgoing, len(messages))
	for i, m := range messages {
		o, err := s.prepare(m, scheduledEnqueueTime)
		if err != nil {
			return nil, err
		}
		out[i] = o
	}
	if len(out) == 0 {
		return nil, nil
	}
	return s.do(ctx, out, false)
}

// CancelScheduledMessages removes scheduled messages by sequence number. Numbers that are
// unknown or no longer scheduled are ignored.
func (s *Sender) CancelScheduledMessages(ctx context.Context, sequenceNumbers []int64, options *azservicebus.CancelScheduledMessagesOptions) error {
	if s.closed.Load() {
		return errClosed()
	}
	if err := s.ns.latency.roundTrip(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.target.cancel(time.Now(), sequenceNumbers)
	return nil
}
