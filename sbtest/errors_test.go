package sbtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

func TestErrors(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name  string
		run   func(f *fixture) error
		check func(error) bool
	}{
		{"oversize message", func(f *fixture) error {
			return f.s.SendMessage(ctx, &azservicebus.Message{Body: make([]byte, DefaultMaxMessageSize)}, nil)
		}, func(err error) bool { return errors.Is(err, azservicebus.ErrMessageTooLarge) }},
		{"oversize scheduled message", func(f *fixture) error {
			_, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{{Body: make([]byte, DefaultMaxMessageSize)}}, f.now(), nil)
			return err
		}, func(err error) bool { return errors.Is(err, azservicebus.ErrMessageTooLarge) }},
		{"nil message", func(f *fixture) error { return f.s.SendMessage(ctx, nil, nil) },
			func(err error) bool { return errors.Is(err, sbkit.ErrNilMessage) }},
		{"nil scheduled message", func(f *fixture) error {
			_, err := f.s.ScheduleMessages(ctx, []*azservicebus.Message{nil}, f.now(), nil)
			return err
		}, func(err error) bool { return errors.Is(err, sbkit.ErrNilMessage) }},
		{"nil batch message", func(f *fixture) error {
			b, _ := f.s.NewBatch(ctx, nil)
			return b.AddMessage(nil, nil)
		}, func(err error) bool { return errors.Is(err, sbkit.ErrNilMessage) }},
		{"nil settle", func(f *fixture) error { return f.r.CompleteMessage(ctx, nil, nil) },
			func(err error) bool { return errors.Is(err, sbkit.ErrNilMessage) }},
		{"nil renew", func(f *fixture) error { return f.r.RenewMessageLock(ctx, nil, nil) },
			func(err error) bool { return errors.Is(err, sbkit.ErrNilMessage) }},
		{"closed sender", func(f *fixture) error {
			_ = f.s.Close(ctx)
			_ = f.s.Close(ctx)
			return f.s.SendMessage(ctx, msg("a"), nil)
		}, isCode(azservicebus.CodeClosed)},
		{"closed sender batch", func(f *fixture) error {
			_ = f.s.Close(ctx)
			_, err := f.s.NewBatch(ctx, nil)
			return err
		}, isCode(azservicebus.CodeClosed)},
		{"closed sender cancel", func(f *fixture) error {
			_ = f.s.Close(ctx)
			return f.s.CancelScheduledMessages(ctx, []int64{1}, nil)
		}, isCode(azservicebus.CodeClosed)},
		{"closed receiver", func(f *fixture) error {
			_ = f.r.Close(ctx)
			_, err := f.r.PeekMessages(ctx, 1, nil)
			return err
		}, isCode(azservicebus.CodeClosed)},
		{"unknown queue sender", func(f *fixture) error { _, err := f.ns.NewSender("nope", nil); return err },
			isCode(azservicebus.CodeNotFound)},
		{"unknown queue receiver", func(f *fixture) error { _, err := f.ns.NewReceiverForQueue("nope", nil); return err },
			isCode(azservicebus.CodeNotFound)},
		{"unknown subscription", func(f *fixture) error { _, err := f.ns.NewReceiverForSubscription("q", "s", nil); return err },
			isCode(azservicebus.CodeNotFound)},
		{"maxMessages 0", func(f *fixture) error { _, err := f.r.ReceiveMessages(ctx, 0, nil); return err },
			func(err error) bool { return errors.Is(err, ErrInvalidArgument) }},
		{"cancelled context send", func(f *fixture) error { return f.s.SendMessage(cancelled, msg("a"), nil) },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"cancelled context receive", func(f *fixture) error { _, err := f.r.ReceiveMessages(cancelled, 1, nil); return err },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"foreign batch", func(f *fixture) error {
			other, _ := f.ns.NewSender("q", nil)
			b, _ := other.NewBatch(ctx, nil)
			return f.s.SendBatch(ctx, b, nil)
		}, func(err error) bool { return errors.Is(err, sbkit.ErrForeignBatch) }},
		{"duplicate queue", func(f *fixture) error { _, err := f.ns.NewQueue("q", nil); return err },
			func(err error) bool { return errors.Is(err, ErrExists) }},
		{"empty name", func(f *fixture) error { _, err := f.ns.NewTopic("", nil); return err },
			func(err error) bool { return errors.Is(err, ErrInvalidOptions) }},
		{"bad receive mode", func(f *fixture) error {
			_, err := f.ns.NewReceiverForQueue("q", &ReceiverOptions{ReceiveMode: 7})
			return err
		}, func(err error) bool { return errors.Is(err, ErrInvalidOptions) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			err := tt.run(f)
			if err == nil || !tt.check(err) {
				t.Fatalf("err = %v", err)
			}
			if n := f.q.Counts().Active + f.q.Counts().Scheduled; n != 0 {
				t.Fatalf("a failed call stored %d messages", n)
			}
			if msg := err.Error(); !strings.Contains(msg, "sbtest") && !strings.Contains(msg, "sbkit") &&
				!strings.Contains(msg, "(") && !errors.Is(err, context.Canceled) && !errors.Is(err, azservicebus.ErrMessageTooLarge) {
				t.Errorf("error %q names no package", msg)
			}
		})
	}
}

func (f *fixture) now() time.Time { return time.Now() }

func isCode(c azservicebus.Code) func(error) bool {
	return func(err error) bool { return code(err) == c }
}

func TestBatchLimits(t *testing.T) {
	ctx := context.Background()
	ns := NewNamespace(&NamespaceOptions{MaxMessageSize: 1000})
	if _, err := ns.NewQueue("q", nil); err != nil {
		t.Fatal(err)
	}
	s, _ := ns.NewSender("q", nil)
	tests := []struct {
		name      string
		maxBytes  uint64
		bodies    []int
		wantAdded int
	}{
		{"default is MaxMessageSize", 0, []int{400, 400, 400}, 2},
		{"MaxBytes", 400, []int{100, 100, 100}, 2},
		{"capped at MaxMessageSize", 5000, []int{600, 600}, 1},
		{"one too large alone", 0, []int{2000}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := s.NewBatch(ctx, &azservicebus.MessageBatchOptions{MaxBytes: tt.maxBytes})
			if err != nil {
				t.Fatal(err)
			}
			added := 0
			for _, n := range tt.bodies {
				err := b.AddMessage(&azservicebus.Message{Body: make([]byte, n)}, nil)
				if err == nil {
					added++
				} else if !errors.Is(err, azservicebus.ErrMessageTooLarge) {
					t.Fatal(err)
				}
			}
			if added != tt.wantAdded || int(b.NumMessages()) != added {
				t.Fatalf("added %d (NumMessages %d), want %d", added, b.NumMessages(), tt.wantAdded)
			}
			want := 0
			for _, n := range tt.bodies[:added] {
				want += int(sbkit.MessageSize(&azservicebus.Message{Body: make([]byte, n)}))
			}
			if b.NumBytes() != uint64(want) {
				t.Fatalf("NumBytes = %d, want %d", b.NumBytes(), want)
			}
		})
	}
}

// TransientError and PermanentError cannot be changed: errors.As hands out a new
// *azservicebus.Error each time, so what one caller does to it reaches nobody else.
func TestServiceErrorsAreImmutable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code azservicebus.Code
	}{{TransientError, azservicebus.CodeConnectionLost}, {PermanentError, azservicebus.CodeUnauthorizedAccess}} {
		wrapped := fmt.Errorf("send: %w", tt.err)
		var sbErr *azservicebus.Error
		if !errors.As(wrapped, &sbErr) || sbErr.Code != tt.code {
			t.Fatalf("errors.As(%v) = %v, want Code %s", wrapped, sbErr, tt.code)
		}
		sbErr.Code = azservicebus.CodeLockLost
		var again *azservicebus.Error
		if !errors.As(tt.err, &again) || again.Code != tt.code {
			t.Fatalf("after a caller changed its copy: %v, want Code %s", again, tt.code)
		}
		if !errors.Is(wrapped, tt.err) || tt.err.Error() != (&azservicebus.Error{Code: tt.code}).Error() {
			t.Fatalf("errors.Is or Error: %q", tt.err.Error())
		}
	}
	if errors.Is(TransientError, PermanentError) {
		t.Fatal("TransientError is PermanentError")
	}
}
