package sbkit_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

func TestRetryAfter(t *testing.T) {
	cause := errors.New("down")
	err := sbkit.RetryAfter(time.Minute, cause)
	action, se := sbkit.SettlementOf(err)
	if action != sbkit.ActionAbandon || se == nil || !se.Redeliver || se.Delay != time.Minute || !errors.Is(err, cause) {
		t.Fatalf("SettlementOf = %v, %+v", action, se)
	}
	if got := err.Error(); got != "sbkit: redeliver after 1m0s: down" {
		t.Errorf("Error() = %q", got)
	}
	if _, se := sbkit.SettlementOf(sbkit.RetryAfter(-time.Second, nil)); se.Delay != 0 {
		t.Errorf("negative delay kept: %v", se.Delay)
	}
}

func TestRedeliveryMessageID(t *testing.T) {
	if got := sbkit.RedeliveryMessageID("m1", 3); got != "m1+r3" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("x", 127)
	a, b := sbkit.RedeliveryMessageID(long, 1), sbkit.RedeliveryMessageID(long, 2)
	if len(a) > 128 || len(b) > 128 || a == b || a != sbkit.RedeliveryMessageID(long, 1) {
		t.Errorf("long ids %q (%d), %q", a, len(a), b)
	}
	if sbkit.RedeliveryMessageID(long, 1) == sbkit.RedeliveryMessageID(strings.Repeat("y", 127), 1) {
		t.Error("two long originals share a copy's MessageID")
	}
}

func TestRedeliveryOf(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range []any{int64(2), int32(2), int(2), uint32(2), uint64(2)} {
		m := &azservicebus.ReceivedMessage{MessageID: "c", ApplicationProperties: map[string]any{
			sbkit.RedeliveryAttemptProperty: v, sbkit.RedeliveryFirstFailureProperty: first, sbkit.RedeliveryOriginalIDProperty: "o"}}
		if a, f := sbkit.RedeliveryOf(m); a != 2 || !f.Equal(first) {
			t.Errorf("%T: attempt %d, first %v", v, a, f)
		}
		if id := sbkit.OriginalMessageID(m); id != "o" {
			t.Errorf("OriginalMessageID = %q", id)
		}
	}
	plain := &azservicebus.ReceivedMessage{MessageID: "p"}
	if a, f := sbkit.RedeliveryOf(plain); a != 0 || !f.IsZero() || sbkit.OriginalMessageID(plain) != "p" {
		t.Errorf("an original: %d, %v, %q", a, f, sbkit.OriginalMessageID(plain))
	}
	if a, _ := sbkit.RedeliveryOf(nil); a != 0 || sbkit.OriginalMessageID(nil) != "" {
		t.Error("nil message")
	}
}
