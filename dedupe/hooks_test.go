package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/dedupe"
)

func TestHooksAndLogger(t *testing.T) {
	var buf bytes.Buffer
	var dupKeys []string
	s := newFaulty(t)
	f := mustNew(t, s, &dedupe.Options{
		Entity: "orders",
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Hooks: dedupe.Hooks{OnDuplicate: func(_ context.Context, key string, m *azservicebus.ReceivedMessage) {
			dupKeys = append(dupKeys, key+"/"+m.MessageID)
		}},
	})
	var runs atomic.Int64
	h := f.Wrap(counting(&runs, nil))
	m := &azservicebus.ReceivedMessage{MessageID: "m", Body: []byte("secret-payload")}
	_ = h(context.Background(), m)
	_ = h(context.Background(), m)
	if len(dupKeys) != 1 || dupKeys[0] != "orders:m/m" {
		t.Fatalf("OnDuplicate calls %v, want one for orders:m", dupKeys)
	}
	s.set(errors.New("store down"), nil, nil)
	_ = h(context.Background(), m)
	logs := buf.String()
	for _, want := range []string{"duplicate skipped", "store error", "op=acquire", "key=orders:m", "store down"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "secret-payload") {
		t.Errorf("logs contain the payload:\n%s", logs)
	}
}
