package sender_test

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sender"
)

func TestErrorMessages(t *testing.T) {
	cause := errors.New("boom")
	se := &sender.SendError{MessageID: "id-1", Attempts: 3, Err: cause}
	if got, want := se.Error(), `sender: message "id-1" not sent after 3 attempt(s): boom`; got != want {
		t.Errorf("SendError.Error() = %q, want %q", got, want)
	}
	all := &sender.SendAllError{Errs: []error{nil, se, nil}}
	if got, want := all.Error(), "sender: 1 of 3 messages not sent; first: "+se.Error(); got != want {
		t.Errorf("SendAllError.Error() = %q, want %q", got, want)
	}
	if !errors.Is(all, cause) || len(all.Unwrap()) != 1 {
		t.Errorf("SendAllError does not unwrap to its causes")
	}
}

func TestSize(t *testing.T) {
	id, session := "0123456789", "s"
	tests := []struct {
		name string
		m    *azservicebus.Message
		want int64
	}{
		{"nil", nil, 0},
		{"empty", &azservicebus.Message{}, 128},
		{"body", &azservicebus.Message{Body: make([]byte, 1000)}, 1128},
		{"strings", &azservicebus.Message{MessageID: &id, SessionID: &session}, 128 + 10 + 1},
		{"properties", &azservicebus.Message{ApplicationProperties: map[string]any{
			"ab": "xyz", "c": []byte{1, 2}, "d": 42}}, 128 + (2 + 8 + 3) + (1 + 8 + 2) + (1 + 8 + 16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sender.Size(tt.m); got != tt.want {
				t.Errorf("Size = %d, want %d", got, tt.want)
			}
		})
	}
}
