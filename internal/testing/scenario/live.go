package scenario

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/emulator/isoduration"
)

// Environment variables read by NewLive, as in the example programs.
const (
	// ConnectionStringEnv holds the connection string of a real namespace.
	ConnectionStringEnv = "SBKIT_CONNECTION_STRING"
	// QueueEnv names the existing queue to use; DefaultQueue when empty.
	QueueEnv = "SBKIT_QUEUE"
	// DefaultQueue is the queue used when QueueEnv is empty.
	DefaultQueue = "orders"
	// SessionQueueEnv names an existing session-enabled queue for the session
	// scenarios; they skip when it is empty.
	SessionQueueEnv = "SBKIT_SESSION_QUEUE"
)

// standardMaxMessageSize is the Standard tier's message size limit, assumed when the
// queue does not report its own.
const standardMaxMessageSize = 256 * 1024

// liveQuietWait is Properties.QuietWait on a real namespace.
const liveQuietWait = time.Second

// drainWait is how long a drain waits for one more message before it calls the queue
// empty.
const drainWait = time.Second

// Live is the backend of a real Service Bus namespace. It cannot create queues: every
// scenario gets the same existing queue, drained first, so scenarios run one at a time.
// Its properties come from the management API when the connection string has Manage
// rights, and are unknown otherwise.
type Live struct {
	client       *azservicebus.Client
	queue        string
	props        Properties
	sessionQueue string // "" when SessionQueueEnv is unset
	sessionProps Properties
}

// NewLive connects to the namespace in SBKIT_CONNECTION_STRING (read with getenv, os.Getenv
// when nil) and uses the queue in SBKIT_QUEUE. It returns nil and no error when the
// connection string is unset. The client is closed when t ends.
func NewLive(t *testing.T, getenv func(string) string) (*Live, error) {
	t.Helper()
	cs := getenv(ConnectionStringEnv)
	if cs == "" {
		return nil, nil
	}
	queue := getenv(QueueEnv)
	if queue == "" {
		queue = DefaultQueue
	}
	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
	if err != nil {
		return nil, fmt.Errorf("scenario: %s: %w", ConnectionStringEnv, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = client.Close(ctx)
	})
	l := &Live{client: client, queue: queue, props: Properties{MaxMessageSize: standardMaxMessageSize, QuietWait: liveQuietWait}}
	l.sessionQueue, l.sessionProps = getenv(SessionQueueEnv), l.props
	if err := readProperties(cs, l.queue, &l.props); err != nil {
		t.Logf("live: queue properties unknown (scenarios that need them skip): %v", err)
	}
	if l.sessionQueue != "" {
		if err := readProperties(cs, l.sessionQueue, &l.sessionProps); err != nil {
			t.Logf("live: session queue properties unknown (scenarios that need them skip): %v", err)
		}
	}
	return l, nil
}

// readProperties asks the management API for a queue's properties.
func readProperties(cs, queue string, props *Properties) error {
	ac, err := admin.NewClientFromConnectionString(cs, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := ac.GetQueue(ctx, queue, nil)
	if err != nil {
		return err
	}
	if resp == nil {
		return fmt.Errorf("queue %q does not exist", queue)
	}
	p := resp.QueueProperties
	if p.LockDuration == nil || p.MaxDeliveryCount == nil {
		return errors.New("lock duration or max delivery count missing")
	}
	lock, err := parseISODuration(*p.LockDuration)
	if err != nil {
		return err
	}
	props.Known = true
	props.LockDuration = lock
	props.MaxDeliveryCount = int(*p.MaxDeliveryCount)
	props.DuplicateDetection = p.RequiresDuplicateDetection != nil && *p.RequiresDuplicateDetection
	if p.MaxMessageSizeInKilobytes != nil && *p.MaxMessageSizeInKilobytes > 0 {
		props.MaxMessageSize = int(*p.MaxMessageSizeInKilobytes) * 1024
	}
	return nil
}

// Name returns "live".
func (l *Live) Name() string { return "live" }

// Parallel returns false: scenarios share the one queue.
func (l *Live) Parallel() bool { return false }

// Queue drains the queue and its dead-letter sub-queue and returns it. opts cannot be
// applied: Properties reports what the queue really has.
func (l *Live) Queue(t *testing.T, opts QueueOptions) Queue {
	t.Helper()
	if opts.RequiresSession {
		return l.sessionQueueFor(t)
	}
	for _, dl := range []bool{false, true} {
		n, err := l.drain(dl)
		if err != nil {
			t.Fatalf("drain %s (dead-letter %v): %v", l.queue, dl, err)
		}
		if n > 0 {
			t.Logf("drained %d messages from %s (dead-letter %v)", n, l.queue, dl)
		}
	}
	return &sdkQueue{client: l.client, name: l.queue, props: l.props}
}

// drain receives and deletes messages until none comes for drainWait.
func (l *Live) drain(deadLetter bool) (int, error) {
	r, err := newSDKReceiver(l.client, l.queue, azservicebus.ReceiveModeReceiveAndDelete, deadLetter)
	if err != nil {
		return 0, err
	}
	return drainReceiver(r)
}

// drainReceiver receives (in receive-and-delete mode) until nothing comes for drainWait,
// then closes r.
func drainReceiver(r interface {
	sbkit.MessageReceiver
	Close(ctx context.Context) error
}) (int, error) {
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = r.Close(ctx)
	}()
	n := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), drainWait)
		msgs, err := r.ReceiveMessages(ctx, 100, nil)
		cancel()
		n += len(msgs)
		if len(msgs) > 0 {
			continue
		}
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			return n, nil
		}
		return n, err
	}
}

// parseISODuration parses the ISO 8601 durations the management API returns for lock
// durations ("PT1M", "PT30S", "PT0.5S", "P0DT0H1M0S").
func parseISODuration(s string) (time.Duration, error) {
	d, _, err := isoduration.Parse(s)
	return d, err
}

// MissingQueue returns a queue name the namespace is not expected to have.
func (l *Live) MissingQueue(t *testing.T) MissingQueue {
	return sdkMissingQueue(l.client, fmt.Sprintf("sbkit-missing-%d", time.Now().UnixNano()))
}

// sessionQueueFor drains the session queue (every session, and its dead-letter queue)
// and returns it, or skips t when SessionQueueEnv is unset.
func (l *Live) sessionQueueFor(t *testing.T) Queue {
	t.Helper()
	if l.sessionQueue == "" {
		t.Skipf("%s is not set: no session-enabled queue", SessionQueueEnv)
	}
	acc := sbkit.NewQueueSessionAcceptor(l.client, l.sessionQueue, &azservicebus.SessionReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	for {
		ctx, cancel := context.WithTimeout(context.Background(), drainWait)
		sr, err := acc.AcceptNextSession(ctx)
		cancel()
		if err != nil {
			break // no session with messages left (CodeTimeout or the deadline)
		}
		n, err := drainReceiver(sr)
		if err != nil {
			t.Fatalf("drain session %s of %s: %v", sr.SessionID(), l.sessionQueue, err)
		}
		t.Logf("drained %d messages of session %s from %s", n, sr.SessionID(), l.sessionQueue)
	}
	r, err := newSDKReceiver(l.client, l.sessionQueue, azservicebus.ReceiveModeReceiveAndDelete, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := drainReceiver(r); err != nil {
		t.Fatalf("drain %s dead-letter queue: %v", l.sessionQueue, err)
	}
	return &sdkQueue{client: l.client, name: l.sessionQueue, props: l.sessionProps}
}
