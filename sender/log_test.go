package sender_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest"
	"github.com/sbkit/sbkit/sender"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestLogsNameMessagesNotPayloads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf syncBuffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		b := newBroker(t, sbtest.Latency{}, nil)
		s := newSender(t, b.s, &sender.Options{Logger: logger, Retry: sbkit.RetryOptions{MaxRetries: 1}})
		b.q.InjectFault(sbtest.Fault{})
		id := "id-42"
		err := s.Send(t.Context(), &azservicebus.Message{MessageID: &id, Body: []byte("SECRET-PAYLOAD")})
		if err == nil {
			t.Fatal("Send succeeded while every send fails")
		}
		b.q.ClearFaults()
		out := buf.String()
		if !strings.Contains(out, "retrying") || !strings.Contains(out, id) {
			t.Errorf("log lacks the retry or the message ID:\n%s", out)
		}
		if strings.Contains(out, "SECRET") {
			t.Errorf("log contains the payload:\n%s", out)
		}
	})
}

// TestRefusesHookOfNoInterface: a hook that implements no hook interface (an outdated
// method signature, say) fails New, named in the error, instead of being ignored
// silently.
func TestRefusesHookOfNoInterface(t *testing.T) {
	b := newBroker(t, sbtest.Latency{}, nil)
	_, err := sender.New(b.s, &sender.Options{Hooks: []sender.Hook{&recordingHooks{}, outdatedHook{}}})
	if !errors.Is(err, sender.ErrInvalidOptions) || !strings.Contains(err.Error(), "hook 1 of Options.Hooks (sender_test.outdatedHook)") {
		t.Errorf("New with an outdated hook = %v, want ErrInvalidOptions naming hook 1", err)
	}
}

// outdatedHook has the result hook's method in its old shape.
type outdatedHook struct{}

func (outdatedHook) OnSendResult(*sender.Result, error) {}
