package explorer

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// deleteJSON is the delete action's request: the message with SequenceNumber of the
// queue or subscription at Path (Queue "main" or "deadletter").
type deleteJSON struct {
	Path           string `json:"path"`
	Queue          string `json:"queue"`
	SequenceNumber int64  `json:"sequenceNumber"`
}

// deleteMessage serves POST delete: {path, queue, sequenceNumber} removes one message
// as a client can: a scheduled one of a queue is cancelled; a deferred one received by
// its sequence number and completed; an available one received and completed, the
// messages before it received too and abandoned (their delivery count goes up by one;
// Service Bus receives no other message by sequence number). A locked message is
// refused (409): its receiver holds it.
func (h *Handler) deleteMessage(r *http.Request) (any, error) {
	var req deleteJSON
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	e, err := h.lookup(req.Path)
	if err != nil {
		return nil, err
	}
	if e.entity == nil {
		return nil, badRequest("a topic holds no messages: delete from one of its subscriptions")
	}
	dlq, err := subQueue(req.Queue)
	if err != nil {
		return nil, err
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	seq := req.SequenceNumber
	peeked, err := h.model.Browse(ctx, e.path, dlq, seq, 1)
	if err != nil {
		return nil, err
	}
	if len(peeked) == 0 || *peeked[0].SequenceNumber != seq {
		return nil, &apiError{status: http.StatusNotFound, msg: "no message with sequence number " + strconv.FormatInt(seq, 10)}
	}
	m := peeked[0]
	out := struct {
		Deleted    bool   `json:"deleted"`
		How        string `json:"how"`
		PassedOver int    `json:"passedOver"`
	}{}
	if !dlq && m.State == azservicebus.MessageStateScheduled {
		if e.kind == "subscription" {
			return nil, &apiError{status: http.StatusConflict, msg: "a scheduled message belongs to topic " + strconv.Quote(e.topic) + " until its time; cancelling it there would cancel it for every subscription"}
		}
		snd, err := h.model.NewSender(e.path)
		if err != nil {
			return nil, err
		}
		defer closeQuietly(ctx, snd)
		if err := snd.CancelScheduledMessages(ctx, []int64{seq}, nil); err != nil {
			return nil, err
		}
		out.Deleted, out.How = true, "cancelled"
		return out, nil
	}
	var rcv Receiver
	if !dlq && e.entity.Options().RequiresSession && m.SessionID != nil {
		rcv, err = h.model.AcceptSession(ctx, e.path, *m.SessionID, azservicebus.ReceiveModePeekLock)
		if err != nil {
			return nil, &apiError{status: http.StatusConflict, msg: "session " + strconv.Quote(*m.SessionID) + " cannot be accepted (another receiver holds it?): " + err.Error()}
		}
	} else if rcv, err = h.model.NewReceiver(e.path, dlq, azservicebus.ReceiveModePeekLock); err != nil {
		return nil, err
	}
	defer closeQuietly(ctx, rcv)
	sctx, scancel := settleContext(ctx)
	defer scancel()
	if m.State == azservicebus.MessageStateDeferred {
		ms, err := rcv.ReceiveDeferredMessages(ctx, []int64{seq}, nil)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			return nil, &apiError{status: http.StatusConflict, msg: "the deferred message is locked by a receiver"}
		}
		if err := rcv.CompleteMessage(sctx, ms[0], nil); err != nil {
			return nil, err
		}
		out.Deleted, out.How = true, "received by sequence number and completed"
		return out, nil
	}
	var passed []*azservicebus.ReceivedMessage
	defer func() {
		for _, p := range passed {
			_ = rcv.AbandonMessage(sctx, p, nil)
		}
	}()
	for !out.Deleted {
		ms, err := receiveAvailable(ctx, rcv, receiveBatch)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			break
		}
		var target *azservicebus.ReceivedMessage
		beyond := false
		for _, got := range ms {
			if n := *got.SequenceNumber; n == seq {
				target = got
			} else {
				passed = append(passed, got)
				beyond = beyond || n > seq
			}
		}
		if target != nil {
			if err := rcv.CompleteMessage(sctx, target, nil); err != nil {
				return nil, err
			}
			out.Deleted, out.How = true, "received and completed"
		}
		if beyond {
			break
		}
	}
	out.PassedOver = len(passed)
	if !out.Deleted {
		return nil, &apiError{status: http.StatusConflict, msg: fmt.Sprintf("message %d is not available: a receiver holds its lock, or it is gone", seq)}
	}
	return out, nil
}
