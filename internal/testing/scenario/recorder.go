package scenario

import (
	"context"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// call is one handler call as a recorder saw it.
type call struct {
	MessageID     string
	Body          string
	DeliveryCount uint32
	Result        error
}

// recorder wraps a handler and records every call; it is safe for concurrent use.
type recorder struct {
	mu    sync.Mutex
	calls []call
}

// wrap returns h recording each call and its result.
func (rec *recorder) wrap(h sbkit.Handler) sbkit.Handler {
	return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
		err := h(ctx, m)
		rec.mu.Lock()
		rec.calls = append(rec.calls, call{m.MessageID, string(m.Body), m.DeliveryCount, err})
		rec.mu.Unlock()
		return err
	}
}

// snapshot returns the calls so far.
func (rec *recorder) snapshot() []call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]call(nil), rec.calls...)
}

// count returns how many calls were recorded.
func (rec *recorder) count() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return len(rec.calls)
}

// byID counts the calls per MessageID.
func (rec *recorder) byID() map[string]int {
	out := map[string]int{}
	for _, c := range rec.snapshot() {
		out[c.MessageID]++
	}
	return out
}
