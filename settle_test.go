package sbkit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

func TestSettlementOf(t *testing.T) {
	cause := errors.New("payment service down")
	tests := []struct {
		name       string
		err        error
		wantAction sbkit.Action
		wantReason string
		wantMarker bool
	}{
		{"nil completes", nil, sbkit.ActionComplete, "", false},
		{"plain error abandons", cause, sbkit.ActionAbandon, "", false},
		{"dead letter", sbkit.DeadLetter("BadOrder", "no items", cause), sbkit.ActionDeadLetter, "BadOrder", true},
		{"dead letter wrapped by middleware", fmt.Errorf("decode: %w", sbkit.DeadLetter("R", "D", nil)), sbkit.ActionDeadLetter, "R", true},
		{"defer", sbkit.Defer(cause), sbkit.ActionDefer, "", true},
		{"skip completes", sbkit.Skip("duplicate"), sbkit.ActionComplete, "duplicate", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			action, se := sbkit.SettlementOf(tc.err)
			if action != tc.wantAction {
				t.Fatalf("action = %v, want %v", action, tc.wantAction)
			}
			if (se != nil) != tc.wantMarker {
				t.Fatalf("marker = %v, want marker %v", se, tc.wantMarker)
			}
			if se != nil && se.Reason != tc.wantReason {
				t.Fatalf("reason = %q, want %q", se.Reason, tc.wantReason)
			}
		})
	}
}

func TestSettleErrorWrapsCause(t *testing.T) {
	cause := errors.New("bad json")
	err := sbkit.DeadLetter("DeserializationFailed", "json: unexpected end", cause)
	if !errors.Is(err, cause) {
		t.Fatal("dead-letter marker does not unwrap to its cause")
	}
	for _, want := range []string{"deadletter", "DeserializationFailed", "json: unexpected end", "bad json"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
}

func TestActionString(t *testing.T) {
	for action, want := range map[sbkit.Action]string{
		sbkit.ActionComplete: "complete", sbkit.ActionAbandon: "abandon",
		sbkit.ActionDeadLetter: "deadletter", sbkit.ActionDefer: "defer", sbkit.Action(42): "Action(42)",
		sbkit.Action(0): "none", // the zero value is no settlement, never "complete"
	} {
		if got := action.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(action), got, want)
		}
	}
}

func TestChainOrder(t *testing.T) {
	var trace []string
	mw := func(name string) sbkit.Middleware {
		return func(next sbkit.Handler) sbkit.Handler {
			return func(ctx context.Context, m *azservicebus.ReceivedMessage) error {
				trace = append(trace, name+">")
				err := next(ctx, m)
				trace = append(trace, "<"+name)
				return err
			}
		}
	}
	h := sbkit.Chain(func(context.Context, *azservicebus.ReceivedMessage) error {
		trace = append(trace, "handler")
		return nil
	}, mw("a"), nil, mw("b"))
	if err := h(context.Background(), &azservicebus.ReceivedMessage{}); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(trace, " "), "a> b> handler <b <a"; got != want {
		t.Fatalf("trace = %q, want %q", got, want)
	}
}
