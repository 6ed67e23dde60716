package receiver

import (
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestCopyableBodies: a copy carries Body, so only a body of one data section may be
// redelivered; an AMQP value or sequence body, or several data sections, would arrive
// empty and is refused with ErrNoRedelivery.
func TestCopyableBodies(t *testing.T) {
	raw := func(b azservicebus.AMQPAnnotatedMessageBody) *azservicebus.ReceivedMessage {
		return &azservicebus.ReceivedMessage{RawAMQPMessage: &azservicebus.AMQPAnnotatedMessage{Body: b}}
	}
	for _, tc := range []struct {
		name string
		m    *azservicebus.ReceivedMessage
		ok   bool
	}{
		{"in memory", &azservicebus.ReceivedMessage{Body: []byte("x")}, true},
		{"one data section", raw(azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x")}}), true},
		{"no body", raw(azservicebus.AMQPAnnotatedMessageBody{}), true},
		{"value", raw(azservicebus.AMQPAnnotatedMessageBody{Value: "x"}), false},
		{"sequence", raw(azservicebus.AMQPAnnotatedMessageBody{Sequence: [][]any{{"x"}}}), false},
		{"two data sections", raw(azservicebus.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("x"), []byte("y")}}), false},
	} {
		err := copyable(tc.m)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrNoRedelivery)) {
			t.Errorf("%s: copyable = %v", tc.name, err)
		}
	}
}
