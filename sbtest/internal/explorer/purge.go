package explorer

import (
	"context"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/admin"
)

// maxPurgeScan bounds how many messages a purge peeks to find the deferred and
// scheduled ones, after it removed the available ones.
const maxPurgeScan = 200_000

// scan peeks the queue or subscription at path (its dead-letter queue when dlq) from
// the start and returns the messages keep selects, up to maxPurgeScan peeked.
func (h *Handler) scan(ctx context.Context, path string, dlq bool, keep func(*azservicebus.ReceivedMessage) bool) ([]*azservicebus.ReceivedMessage, error) {
	var out []*azservicebus.ReceivedMessage
	from := int64(0)
	for scanned := 0; scanned < maxPurgeScan; {
		ms, err := h.model.Browse(ctx, path, dlq, from, peekChunk)
		if err != nil {
			return out, err
		}
		for _, m := range ms {
			from = *m.SequenceNumber + 1
			if keep(m) {
				out = append(out, m)
			}
		}
		scanned += len(ms)
		if len(ms) < peekChunk {
			break
		}
	}
	return out, nil
}

// purgeJSON is what a purge did: Removed messages were received and deleted (Deferred
// of them deferred ones, received by sequence number), Cancelled scheduled ones were
// cancelled; Left are the entity's counts afterwards (locked messages stay: their
// receivers hold them).
type purgeJSON struct {
	Removed   int           `json:"removed"`
	Deferred  int           `json:"deferred"`
	Cancelled int           `json:"cancelled"`
	Left      *countsJSON   `json:"left"`
	Failed    []failureJSON `json:"failed"`
	Notes     []string      `json:"notes"`
	Stopped   string        `json:"stopped,omitempty"`
}

// purge serves POST purge: {path, queue} removes every message of the queue or
// subscription at path (queue "main", the default) or of its dead-letter queue
// ("deadletter") that a client can remove: the available ones are received in
// receive-and-delete mode (session by session where the entity requires sessions), then
// the deferred ones received by sequence number, and a queue's scheduled ones
// cancelled. It removes at most as many available messages as there were when it
// started, so a steady sender cannot keep it going. Locked messages stay with their
// receivers, and a subscription's scheduled messages with their topic (cancelling
// them there would cancel them for every subscription).
func (h *Handler) purge(r *http.Request) (any, error) {
	var req selectJSON
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if req.All || len(req.SequenceNumbers) > 0 {
		return nil, badRequest("purge takes path and queue only")
	}
	e, err := h.lookup(req.Path)
	if err != nil {
		return nil, err
	}
	if e.entity == nil {
		return nil, badRequest("a topic holds no messages: purge its subscriptions")
	}
	dlq, err := subQueue(req.Queue)
	if err != nil {
		return nil, err
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	out := purgeJSON{Failed: []failureJSON{}, Notes: []string{}}
	c := e.entity.Counts()
	sessions := !dlq && e.entity.Options().RequiresSession
	if err := h.purgeAvailable(ctx, e, dlq, sessions, &c, &out); err != nil {
		out.Stopped = err.Error()
	}
	if out.Stopped == "" {
		if err := h.purgeDeferred(ctx, e, dlq, sessions, &out); err != nil {
			out.Stopped = err.Error()
		}
	}
	if out.Stopped == "" && !dlq {
		if err := h.purgeScheduled(ctx, e, &out); err != nil {
			out.Stopped = err.Error()
		}
	}
	out.Left = countsOf(e.entity.Counts())
	return out, nil
}

// drain receives and deletes (rcv is in receive-and-delete mode) what is available,
// at most limit messages.
func drain(ctx context.Context, rcv Receiver, limit int) (int, error) {
	n := 0
	for n < limit {
		ms, err := receiveAvailable(ctx, rcv, min(receiveBatch, limit-n))
		n += len(ms)
		if err != nil || len(ms) == 0 {
			return n, err
		}
	}
	return n, nil
}

// purgeAvailable removes the available messages; c are the counts at the start.
func (h *Handler) purgeAvailable(ctx context.Context, e entityRef, dlq, sessions bool, c *admin.Counts, out *purgeJSON) error {
	limit := c.Active
	if dlq {
		limit = c.DeadLetter
	}
	if !sessions {
		rcv, err := h.model.NewReceiver(e.path, dlq, azservicebus.ReceiveModeReceiveAndDelete)
		if err != nil {
			return err
		}
		defer closeQuietly(ctx, rcv)
		n, err := drain(ctx, rcv, limit)
		out.Removed += n
		return err
	}
	for _, id := range h.model.Sessions(e.path) {
		if out.Removed >= limit {
			break
		}
		rcv, err := h.model.AcceptSession(ctx, e.path, id, azservicebus.ReceiveModeReceiveAndDelete)
		if err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("session %q skipped: %v", id, err))
			continue
		}
		n, err := drain(ctx, rcv, limit-out.Removed)
		closeQuietly(ctx, rcv)
		out.Removed += n
		if err != nil {
			return err
		}
	}
	return nil
}

// purgeDeferred removes the deferred messages, received by sequence number in
// receive-and-delete mode (through their session where the entity requires sessions).
func (h *Handler) purgeDeferred(ctx context.Context, e entityRef, dlq, sessions bool, out *purgeJSON) error {
	deferred, err := h.scan(ctx, e.path, dlq, func(m *azservicebus.ReceivedMessage) bool {
		return m.State == azservicebus.MessageStateDeferred
	})
	if err != nil || len(deferred) == 0 {
		return err
	}
	bySession := map[string][]int64{}
	for _, m := range deferred {
		id := ""
		if sessions && m.SessionID != nil {
			id = *m.SessionID
		}
		bySession[id] = append(bySession[id], *m.SequenceNumber)
	}
	for id, seqs := range bySession {
		var rcv Receiver
		if sessions {
			rcv, err = h.model.AcceptSession(ctx, e.path, id, azservicebus.ReceiveModeReceiveAndDelete)
		} else {
			rcv, err = h.model.NewReceiver(e.path, dlq, azservicebus.ReceiveModeReceiveAndDelete)
		}
		if err != nil {
			out.Notes = append(out.Notes, fmt.Sprintf("%d deferred messages of session %q skipped: %v", len(seqs), id, err))
			continue
		}
		for len(seqs) > 0 && err == nil {
			n := min(len(seqs), receiveBatch)
			var ms []*azservicebus.ReceivedMessage
			ms, err = rcv.ReceiveDeferredMessages(ctx, seqs[:n], nil)
			out.Removed += len(ms)
			out.Deferred += len(ms)
			seqs = seqs[n:]
		}
		closeQuietly(ctx, rcv)
		if err != nil {
			return err
		}
	}
	return nil
}

// purgeScheduled cancels a queue's scheduled messages; a subscription's stay (see
// purge).
func (h *Handler) purgeScheduled(ctx context.Context, e entityRef, out *purgeJSON) error {
	scheduled, err := h.scan(ctx, e.path, false, func(m *azservicebus.ReceivedMessage) bool {
		return m.State == azservicebus.MessageStateScheduled
	})
	if err != nil || len(scheduled) == 0 {
		return err
	}
	if e.kind == "subscription" {
		out.Notes = append(out.Notes, fmt.Sprintf("%d scheduled messages stay: until their time they belong to topic %q, where cancelling would cancel them for every subscription", len(scheduled), e.topic))
		return nil
	}
	snd, err := h.model.NewSender(e.path)
	if err != nil {
		return err
	}
	defer closeQuietly(ctx, snd)
	seqs := make([]int64, len(scheduled))
	for i, m := range scheduled {
		seqs[i] = *m.SequenceNumber
	}
	if err := snd.CancelScheduledMessages(ctx, seqs, nil); err != nil {
		return err
	}
	out.Cancelled = len(seqs)
	return nil
}
