package explorer

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Bounds of an action: it stops after actionTimeout (a re-drive or purge of a long
// queue then reports what it did, and can be run again), waits idleWait for a message
// before it concludes that none is available, receives in batches of receiveBatch,
// and settles what it still holds within settleTimeout after it stops.
const (
	actionTimeout = 20 * time.Second
	idleWait      = 250 * time.Millisecond
	receiveBatch  = 250
	settleTimeout = 10 * time.Second
)

// actionContext bounds an action of r.
func actionContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), actionTimeout)
}

// settleContext is the context of the settlements an action owes once it stops: it
// outlives the action's own deadline, so that no lock the action took is left to
// expire.
func settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
}

// receiveAvailable receives up to max messages that are available now: it returns
// none, without an error, when none comes within idleWait (what is left is locked by
// other receivers, deferred, scheduled, or gone).
func receiveAvailable(ctx context.Context, r Receiver, max int) ([]*azservicebus.ReceivedMessage, error) {
	wait, cancel := context.WithTimeout(ctx, idleWait)
	defer cancel()
	ms, err := r.ReceiveMessages(wait, max, nil)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, nil
	}
	return ms, err
}

// closeQuietly closes c within the settle timeout; an explorer action has reported its
// outcome by then, and the model's receivers and senders cannot fail to close.
func closeQuietly(ctx context.Context, c interface{ Close(context.Context) error }) {
	cctx, cancel := settleContext(ctx)
	defer cancel()
	_ = c.Close(cctx)
}

// selectJSON picks messages of an entity's main or dead-letter queue: those with the
// given sequence numbers, or All of them.
type selectJSON struct {
	Path            string  `json:"path"`
	Queue           string  `json:"queue"`
	SequenceNumbers []int64 `json:"sequenceNumbers"`
	All             bool    `json:"all"`
}

// failureJSON is a message an action could not handle, and why.
type failureJSON struct {
	SequenceNumber int64  `json:"sequenceNumber"`
	Error          string `json:"error"`
}
