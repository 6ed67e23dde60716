package sender_test

import (
	"errors"
	"testing"

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
