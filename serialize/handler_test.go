package serialize_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/serialize"
)

func TestHandlerSettlements(t *testing.T) {
	reg := mustNew(t, &serialize.Options{MaxBodySize: 64})
	errBusiness := errors.New("business failure")
	tests := []struct {
		name       string
		msg        *azservicebus.ReceivedMessage
		opts       *serialize.HandlerOptions
		handlerErr error
		wantAction sbkit.Action
		wantReason string
		wantCalled bool
		wantHook   bool
		wantDesc   string // substring
	}{
		{"good message completes", received("application/json", []byte(`{"id":"a"}`)), nil, nil, sbkit.ActionComplete, "", true, false, ""},
		{"handler error abandons", received("application/json", []byte(`{"id":"a"}`)), nil, errBusiness, sbkit.ActionAbandon, "", true, false, ""},
		{"handler marker passes through", received("application/json", []byte(`{"id":"a"}`)), nil, sbkit.Defer(nil), sbkit.ActionDefer, "", true, false, ""},
		{"garbage dead-letters", received("application/json", []byte(`garbage`)), nil, nil, sbkit.ActionDeadLetter, "DeserializationFailed", false, true, `content-type "application/json" (json): invalid character`},
		{"unknown type dead-letters", received("application/msgpack", []byte{0x80}), nil, nil, sbkit.ActionDeadLetter, "DeserializationFailed", false, true, `no codec for content type "application/msgpack"`},
		{"custom reason", received("", []byte(`garbage`)), &serialize.HandlerOptions{DeadLetterReason: "BadPayload"}, nil, sbkit.ActionDeadLetter, "BadPayload", false, true, "content-type: serialize: no content type"},
		{"too large", received("application/json", bytes.Repeat([]byte(" "), 65)), nil, nil, sbkit.ActionDeadLetter, "BodyTooLarge", false, true, "65 bytes, limit 64"},
		{"too large custom reason", received("application/json", bytes.Repeat([]byte(" "), 65)), &serialize.HandlerOptions{BodyTooLargeReason: "Huge"}, nil, sbkit.ActionDeadLetter, "Huge", false, true, "limit 64"},
		{"unsupported AMQP body", &azservicebus.ReceivedMessage{RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Body: azservicebus.AMQPAnnotatedMessageBody{Value: map[any]any{1: 2}}}}, nil, nil, sbkit.ActionDeadLetter, "DeserializationFailed", false, true, "unsupported AMQP body: AMQP map key of type int"},
		{"nil message is not dead-lettered", nil, nil, nil, sbkit.ActionAbandon, "", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called, hooked := false, false
			var hookErr error
			var opts serialize.HandlerOptions
			if tt.opts != nil {
				opts = *tt.opts
			}
			var hookEvent *serialize.UndecodableError
			opts.Hooks = []serialize.Hook{serialize.DecodeErrorHookFunc(func(_ context.Context, e *serialize.UndecodableError) {
				hooked, hookErr, hookEvent = true, e.Err, e
			})}
			h := mustHandler(t, reg, func(_ context.Context, o order, _ *azservicebus.ReceivedMessage) error {
				called = true
				if o.ID != "a" {
					t.Errorf("handler got %+v", o)
				}
				return tt.handlerErr
			}, &opts)
			err := h(context.Background(), tt.msg)
			action, se := sbkit.SettlementOf(err)
			if action != tt.wantAction {
				t.Fatalf("action %v (err %v), want %v", action, err, tt.wantAction)
			}
			if called != tt.wantCalled || hooked != tt.wantHook {
				t.Fatalf("handler called %v, hook called %v; want %v, %v", called, hooked, tt.wantCalled, tt.wantHook)
			}
			if tt.wantReason == "" {
				return
			}
			if se.Reason != tt.wantReason || !strings.Contains(se.Description, tt.wantDesc) {
				t.Fatalf("reason %q description %q; want %q containing %q", se.Reason, se.Description, tt.wantReason, tt.wantDesc)
			}
			if !errors.Is(err, hookErr) || hookErr == nil {
				t.Fatalf("the hook's error %v is not the dead-letter cause %v", hookErr, err)
			}
			if hookEvent.Message != tt.msg || hookEvent.Reason != se.Reason || hookEvent.Description != se.Description {
				t.Fatalf("hook event %+v, want the message, reason %q and description %q", hookEvent, se.Reason, se.Description)
			}
			var uerr *serialize.UndecodableError
			if !errors.As(err, &uerr) || uerr != hookEvent {
				t.Fatalf("the result's cause %v is not the hook's %v", uerr, hookEvent)
			}
		})
	}
}

func TestHandlerDescriptionTruncated(t *testing.T) {
	reg := mustNew(t, nil)
	// Many failing fallbacks with long errors make a long description.
	long := strings.Repeat("é", 3000) // a 2-byte rune, so truncation must respect UTF-8
	if err := reg.Register("application/long", failing{msg: long}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opts *serialize.HandlerOptions
		max  int
	}{
		{nil, serialize.DefaultMaxDescriptionLength},
		{&serialize.HandlerOptions{MaxDescriptionLength: 100}, 100},
	} {
		h := mustHandler(t, reg, func(context.Context, order, *azservicebus.ReceivedMessage) error { return nil }, tt.opts)
		_, se := sbkit.SettlementOf(h(context.Background(), received("application/long", []byte("x"))))
		if se == nil || len(se.Description) > tt.max || len(se.Description) < tt.max-4 {
			t.Fatalf("description of %d bytes, want at most %d and close to it", len(se.Description), tt.max)
		}
		if !strings.HasSuffix(se.Description, "...") || !strings.HasPrefix(se.Description, `2 attempt(s) failed: content-type "application/long" (long): éé`) {
			t.Fatalf("description %q", se.Description[:60])
		}
		var derr *serialize.DecodeError
		if !errors.As(se, &derr) || len(derr.Attempts[0].Err.Error()) != len(long) {
			t.Fatal("the cause must keep the full, untruncated errors")
		}
	}
}

type failing struct{ msg string }

func (f failing) Name() string                { return "long" }
func (f failing) Marshal(any) ([]byte, error) { return nil, errors.New(f.msg) }
func (f failing) Unmarshal([]byte, any) error { return errors.New(f.msg) }

// TestHandlerFailsFast: a nil registry or function, or bad options, fail when the
// handler is made, never per message.
func TestHandlerFailsFast(t *testing.T) {
	reg := mustNew(t, nil)
	fn := func(context.Context, order, *azservicebus.ReceivedMessage) error { return nil }
	for _, tt := range []struct {
		name string
		err  error
		want []error
	}{
		{"nil func", second(serialize.Handler[order](reg, nil, nil)), []error{sbkit.ErrNilHandler}},
		{"nil registry", second(serialize.Handler(nil, fn, nil)), []error{serialize.ErrNilRegistry}},
		{"middleware nil registry", second(serialize.Middleware[order](nil, nil)), []error{serialize.ErrNilRegistry}},
		{"negative description length", second(serialize.Handler(reg, fn, &serialize.HandlerOptions{MaxDescriptionLength: -5})), []error{serialize.ErrInvalidOptions}},
		{"middleware bad options", second(serialize.Middleware[order](reg, &serialize.HandlerOptions{MaxDescriptionLength: -1})), []error{serialize.ErrInvalidOptions}},
		{"hook of no interface", second(serialize.Handler(reg, fn, &serialize.HandlerOptions{Hooks: []serialize.Hook{"not a hook"}})), []error{serialize.ErrInvalidOptions}},
	} {
		for _, w := range tt.want {
			if !errors.Is(tt.err, w) {
				t.Errorf("%s: %v, want it to wrap %v", tt.name, tt.err, w)
			}
		}
	}
	mw, err := serialize.Middleware[order](reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, sbkit.ErrNilHandler) {
			t.Fatalf("middleware applied to nil panicked with %v, want ErrNilHandler", err)
		}
	}()
	mw(nil)
}

// TestHandlerPanickingHook: a hook that panics changes nothing but a log line.
func TestHandlerPanickingHook(t *testing.T) {
	var buf bytes.Buffer
	reg := mustNew(t, nil)
	h := mustHandler(t, reg, func(context.Context, order, *azservicebus.ReceivedMessage) error { return nil }, &serialize.HandlerOptions{
		Logger: slog.New(slog.NewTextHandler(&buf, nil)),
		Hooks:  []serialize.Hook{serialize.DecodeErrorHookFunc(func(context.Context, *serialize.UndecodableError) { panic("hook") })},
	})
	if a, _ := sbkit.SettlementOf(h(context.Background(), received("application/json", []byte("x")))); a != sbkit.ActionDeadLetter {
		t.Fatalf("got %v", a)
	}
	if !strings.Contains(buf.String(), "recovered panic in DecodeErrorHook") {
		t.Fatalf("log %q", buf.String())
	}
}

func second[T any](_ T, err error) error { return err }

func mustHandler[T any](t *testing.T, reg *serialize.Registry, fn func(context.Context, T, *azservicebus.ReceivedMessage) error, opts *serialize.HandlerOptions) sbkit.Handler {
	t.Helper()
	h, err := serialize.Handler(reg, fn, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHandlerLogsWithoutBody(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	reg := mustNew(t, &serialize.Options{Fallbacks: []string{}})
	h := mustHandler(t, reg, func(context.Context, string, *azservicebus.ReceivedMessage) error { return nil }, &serialize.HandlerOptions{Logger: logger})
	_ = h(context.Background(), received("application/unknown", []byte("SECRET-PAYLOAD")))
	if !strings.Contains(buf.String(), "DeserializationFailed") || !strings.Contains(buf.String(), "messageID=m1") {
		t.Fatalf("log: %s", buf.String())
	}
	if strings.Contains(buf.String(), "SECRET-PAYLOAD") {
		t.Fatal("the body was logged")
	}
}

func TestMiddleware(t *testing.T) {
	reg := mustNew(t, nil)
	var got order
	var ok bool
	next := func(ctx context.Context, msg *azservicebus.ReceivedMessage) error {
		got, ok = serialize.ValueFrom[order](ctx)
		return nil
	}
	mw, err := serialize.Middleware[order](reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := sbkit.Chain(next, mw)
	if err := h(context.Background(), received("application/json", []byte(`{"id":"mw"}`))); err != nil || !ok || got.ID != "mw" {
		t.Fatalf("got %+v %v %v", got, ok, err)
	}
	ok = false
	err = h(context.Background(), received("application/json", []byte(`{`)))
	if a, se := sbkit.SettlementOf(err); a != sbkit.ActionDeadLetter || se.Reason != serialize.DefaultDeadLetterReason || ok {
		t.Fatalf("garbage: action %v, next ran %v", a, ok)
	}
	if _, found := serialize.ValueFrom[string](context.Background()); found {
		t.Fatal("ValueFrom found a value in an empty context")
	}
}
