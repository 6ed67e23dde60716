package explorer

import (
	"fmt"
	"maps"
	"net/http"
	"strconv"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// send serves POST send: {path, body, contentType, properties, sessionId,
// scheduledEnqueueTime, ...} (sendJSON) sends Count copies (default 1) to the queue or
// topic at path, or schedules them.
func (h *Handler) send(r *http.Request) (any, error) {
	var req sendJSON
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	e, err := h.lookup(req.Path)
	if err != nil {
		return nil, err
	}
	if e.kind == "subscription" {
		return nil, badRequest("messages are sent to a queue or a topic, not to a subscription: send to topic " + strconv.Quote(e.topic))
	}
	n := req.Count
	if n == 0 {
		n = 1
	}
	if n < 0 || n > maxSendCount {
		return nil, badRequest(fmt.Sprintf("count must be in [1, %d]", maxSendCount))
	}
	msg, at, err := req.message()
	if err != nil {
		return nil, err
	}
	ctx, cancel := actionContext(r)
	defer cancel()
	s, err := h.model.NewSender(e.path)
	if err != nil {
		return nil, err
	}
	defer closeQuietly(ctx, s)
	msgs := make([]*azservicebus.Message, n)
	for i := range msgs {
		c := *msg
		c.ApplicationProperties = maps.Clone(msg.ApplicationProperties)
		msgs[i] = &c
	}
	out := struct {
		Sent            int     `json:"sent"`
		SequenceNumbers []int64 `json:"sequenceNumbers,omitempty"`
	}{}
	if !at.IsZero() {
		seqs, err := s.ScheduleMessages(ctx, msgs, at, nil)
		if err != nil {
			return nil, err
		}
		out.Sent, out.SequenceNumbers = len(seqs), seqs
		return out, nil
	}
	for _, m := range msgs {
		if err := s.SendMessage(ctx, m, nil); err != nil {
			if out.Sent == 0 {
				return nil, err
			}
			return nil, fmt.Errorf("sent %d of %d, then: %w", out.Sent, n, err)
		}
		out.Sent++
	}
	return out, nil
}
