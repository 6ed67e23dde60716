package explorer

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// redriveJSON is what a re-drive did: Redriven dead letters were copied to Target and
// then completed; Failed ones stay in the dead-letter queue (except where the error
// says the copy was stored); PassedOver messages were received and abandoned to reach
// the selected ones (their delivery count went up by one); NotFound selected numbers
// were not available (locked by another receiver, or gone).
type redriveJSON struct {
	Target     string        `json:"target"`
	Redriven   int           `json:"redriven"`
	Failed     []failureJSON `json:"failed"`
	PassedOver int           `json:"passedOver"`
	NotFound   []int64       `json:"notFound"`
	Stopped    string        `json:"stopped,omitempty"`
}

// droppedProperties are the application properties a re-driven copy goes without: those
// the service adds to a dead-lettered message (the SDK reads DeadLetterReason and
// DeadLetterErrorDescription from them, message.go of azservicebus), and the delayed-
// redelivery ones, so that a processor's redelivery policy starts again for the copy
// (as the deadletter package's copies do, deadletter/copy.go).
var droppedProperties = []string{"DeadLetterReason", "DeadLetterErrorDescription",
	sbkit.RedeliveryAttemptProperty, sbkit.RedeliveryFirstFailureProperty, sbkit.RedeliveryOriginalIDProperty}

// redriveCountProperty counts the re-drives of a message, as the deadletter package's
// RedriveCountProperty does (deadletter/copy.go), so that a consumer or that package's
// filters tell a message that keeps coming back, whichever tool re-drove it.
const redriveCountProperty = "sbkit_redrive_count"

// redriveCopy is the message a re-drive sends for the dead letter m: its body, its
// MessageID and every system and application property a sender sets, without the
// droppedProperties and with the re-drive count one higher; the broker assigns a
// new sequence number, enqueued time and delivery count.
func redriveCopy(m *azservicebus.ReceivedMessage) *azservicebus.Message {
	props := maps.Clone(m.ApplicationProperties)
	if props == nil {
		props = map[string]any{}
	}
	for _, k := range droppedProperties {
		delete(props, k)
	}
	n, _ := props[redriveCountProperty].(int64)
	props[redriveCountProperty] = n + 1
	id := m.MessageID // not the received message's own field, which the copy would share
	c := m.Message()
	c.ApplicationProperties = props
	c.MessageID = &id
	c.ScheduledEnqueueTime = nil
	return c
}

// redrive serves POST redrive: {path, sequenceNumbers | all} moves dead letters of the
// queue or subscription at path back to their source: the queue itself, or the
// subscription's topic (every subscription whose rules match gets a copy, as when it
// was first sent).
//
// It keeps the guarantees of a re-drive that loses nothing: each dead letter is
// received with a lock, its copy (redriveCopy) is sent, and only once the send has
// succeeded is the dead letter completed; a failed send abandons it (it stays). A copy
// the target's duplicate detection would drop (same MessageID within its window) is
// not sent and the dead letter stays. A completion that fails after the copy was
// stored leaves both (the dead letter abandoned, not left locked), reported; the kept
// MessageID lets duplicate detection or a consumer's de-duplication recognise the
// second one.
//
// Selected messages are reached as any client reaches a message in the middle of a
// queue: the ones before them are received too and abandoned when the action ends.
// "All" re-drives at most the dead letters there were when it started, so that copies
// dead-lettered again meanwhile are not re-driven in a loop.
func (h *Handler) redrive(r *http.Request) (any, error) {
	var req selectJSON
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	e, err := h.lookup(req.Path)
	if err != nil {
		return nil, err
	}
	if e.entity == nil {
		return nil, badRequest("a topic has no dead-letter queue: re-drive one of its subscriptions'")
	}
	if req.All == (len(req.SequenceNumbers) > 0) {
		return nil, badRequest("give either sequenceNumbers or all")
	}
	target, window := e.path, e.entity.Options().DuplicateDetectionWindow
	if e.kind == "subscription" {
		t, ok := h.model.Topic(e.topic)
		if !ok {
			return nil, &apiError{status: http.StatusNotFound, msg: "topic " + strconv.Quote(e.topic) + " is gone"}
		}
		target, window = t.Name(), t.Options().DuplicateDetectionWindow
	}
	want := make(map[int64]bool, len(req.SequenceNumbers))
	for _, n := range req.SequenceNumbers {
		want[n] = true
	}
	limit := len(want)
	if req.All {
		limit = e.entity.Counts().DeadLetter
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	rcv, err := h.model.NewReceiver(e.path, true, azservicebus.ReceiveModePeekLock)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(ctx, rcv)
	snd, err := h.model.NewSender(target)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(ctx, snd)

	out := redriveJSON{Target: target, Failed: []failureJSON{}, NotFound: []int64{}}
	var passed []*azservicebus.ReceivedMessage
	defer func() { // give back what was received only to reach the selected ones
		sctx, scancel := settleContext(ctx)
		defer scancel()
		for _, m := range passed {
			_ = rcv.AbandonMessage(sctx, m, nil)
		}
	}()
	var last int64 // the highest selected number: messages are received in order
	for n := range want {
		last = max(last, n)
	}
	done, beyond := 0, false
	for done < limit && !beyond {
		n := receiveBatch
		if req.All {
			n = min(n, limit-done)
		}
		ms, err := receiveAvailable(ctx, rcv, n)
		if err != nil {
			out.Stopped = err.Error()
			break
		}
		if len(ms) == 0 {
			break
		}
		for _, m := range ms {
			seq := *m.SequenceNumber
			if (!req.All && !want[seq]) || done >= limit {
				passed = append(passed, m)
				beyond = beyond || (!req.All && seq > last)
				continue
			}
			delete(want, seq)
			done++
			if err := h.redriveOne(ctx, rcv, snd, m, window); err != nil {
				out.Failed = append(out.Failed, failureJSON{SequenceNumber: seq, Error: err.Error()})
				continue
			}
			out.Redriven++
		}
	}
	for seq := range want {
		out.NotFound = append(out.NotFound, seq)
	}
	slices.Sort(out.NotFound)
	out.PassedOver = len(passed)
	return out, nil
}

// redriveOne copies the dead letter m through snd, then completes it; see redrive.
func (h *Handler) redriveOne(ctx context.Context, rcv Receiver, snd Sender, m *azservicebus.ReceivedMessage, window time.Duration) error {
	sctx, cancel := settleContext(ctx)
	defer cancel()
	// "Duplicate detection": the broker drops a message whose MessageId it accepted
	// within the window, and the send still succeeds
	// (https://learn.microsoft.com/azure/service-bus-messaging/duplicate-detection).
	// The original was accepted no later than its EnqueuedTime.
	if window > 0 && m.EnqueuedTime != nil && time.Since(*m.EnqueuedTime) < window {
		_ = rcv.AbandonMessage(sctx, m, nil)
		return fmt.Errorf("not re-driven: the target detects duplicates for %v and MessageId %q was sent at %s, so the copy would be dropped; re-drive it after %s",
			window, m.MessageID, m.EnqueuedTime.UTC().Format(time.RFC3339), m.EnqueuedTime.Add(window).UTC().Format(time.RFC3339))
	}
	// An AMQP value or sequence body, or several data sections, is no Body an
	// azservicebus.Message carries (AMQP 1.0 part 3, 3.2 "Message Format"): such a dead
	// letter stays rather than be copied without its body.
	if raw := m.RawAMQPMessage; raw != nil && (raw.Body.Value != nil || raw.Body.Sequence != nil || len(raw.Body.Data) > 1) {
		_ = rcv.AbandonMessage(sctx, m, nil)
		return fmt.Errorf("not re-driven: its body is an AMQP value, sequence or several data sections, which this copy cannot carry; the dead letter stays")
	}
	if err := snd.SendMessage(ctx, redriveCopy(m), nil); err != nil {
		_ = rcv.AbandonMessage(sctx, m, nil)
		return fmt.Errorf("not re-driven, the dead letter stays: sending the copy: %w", err)
	}
	if err := rcv.CompleteMessage(sctx, m, nil); err != nil {
		// Give the lock back rather than leave it to expire; the dead letter stays.
		_ = rcv.AbandonMessage(sctx, m, nil)
		return fmt.Errorf("the copy was stored but completing the dead letter failed, so both exist (same MessageId %q): %w", m.MessageID, err)
	}
	return nil
}
