package sbkit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/sbkit/sbkit"
)

func amqpErr(c amqp.ErrCond) *amqp.Error {
	return &amqp.Error{Condition: c, Description: "from the broker"}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

var _ net.Error = (*net.OpError)(nil)

func TestErrorClassification(t *testing.T) {
	code := func(c azservicebus.Code) error { return &azservicebus.Error{Code: c} }
	tests := []struct {
		name                           string
		err                            error
		transient, permanent, lockLost bool
	}{
		{"nil", nil, false, false, false},
		{"connection lost", code(azservicebus.CodeConnectionLost), true, false, false},
		{"service timeout", code(azservicebus.CodeTimeout), true, false, false},
		{"wrapped connection lost", fmt.Errorf("send: %w", code(azservicebus.CodeConnectionLost)), true, false, false},
		{"lock lost", code(azservicebus.CodeLockLost), false, true, true},
		{"sbkit lock lost", fmt.Errorf("renew: %w", sbkit.ErrLockLost), false, true, true},
		{"unauthorized", code(azservicebus.CodeUnauthorizedAccess), false, true, false},
		{"not found", code(azservicebus.CodeNotFound), false, true, false},
		{"closed", code(azservicebus.CodeClosed), false, true, false},
		{"message too large", fmt.Errorf("x: %w", azservicebus.ErrMessageTooLarge), false, true, false},
		{"cancelled", context.Canceled, false, true, false},
		{"deadline", fmt.Errorf("send: %w", context.DeadlineExceeded), false, true, false},
		{"net timeout", &net.OpError{Op: "dial", Err: timeoutErr{}}, true, false, false},
		{"unknown error is neither", errors.New("boom"), false, false, false},
		// The AMQP conditions the SDK treats as fatal (azservicebus's internal/errors.go,
		// amqpConditionsToRecoveryKind), as its sender returns them: bare, or in the
		// *amqp.LinkError of a detach.
		{"amqp not-found", amqpErr(amqp.ErrCondNotFound), false, true, false},
		{"amqp not-found detach", &amqp.LinkError{RemoteErr: amqpErr(amqp.ErrCondNotFound)}, false, true, false},
		{"amqp unauthorized", amqpErr(amqp.ErrCondUnauthorizedAccess), false, true, false},
		{"amqp message size exceeded", amqpErr(amqp.ErrCondMessageSizeExceeded), false, true, false},
		{"amqp not-allowed", amqpErr(amqp.ErrCondNotAllowed), false, true, false},
		{"entity disabled", amqpErr("com.microsoft:entity-disabled"), false, true, false},
		{"amqp lock lost", amqpErr("com.microsoft:message-lock-lost"), false, true, true},
		{"amqp detach-forced is neither", amqpErr(amqp.ErrCondDetachForced), false, false, false},
		{"quota exceeded is neither", amqpErr(amqp.ErrCondResourceLimitExceeded), false, false, false},
		{"server busy is neither", amqpErr("com.microsoft:server-busy"), false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := sbkit.IsTransient(tc.err); got != tc.transient {
				t.Errorf("IsTransient = %v, want %v", got, tc.transient)
			}
			if got := sbkit.IsPermanent(tc.err); got != tc.permanent {
				t.Errorf("IsPermanent = %v, want %v", got, tc.permanent)
			}
			if got := sbkit.IsLockLost(tc.err); got != tc.lockLost {
				t.Errorf("IsLockLost = %v, want %v", got, tc.lockLost)
			}
		})
	}
}
