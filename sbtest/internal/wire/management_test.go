package wire

import (
	"testing"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
)

func TestAudiencePath(t *testing.T) {
	for in, want := range map[string]string{
		"amqp://127.0.0.1:5672/q":                      "q",
		"sb://ns.servicebus.windows.net/q/$management": "q",
		"amqp://h/t/Subscriptions/s/$DeadLetterQueue":  "t/Subscriptions/s",
		"amqp://h/q/$Transfer/$DeadLetterQueue":        "q",
		"amqp://h/":                                    "",
		"amqp://h":                                     "",
	} {
		got, ok := audiencePath(in)
		if got != want || ok != (want != "") {
			t.Errorf("audiencePath(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

// A failed $management response names its condition in an errorCondition application
// property, a symbol (see statusFor), which the Python and .NET SDKs read.
func TestFailEncodesErrorConditionAsSymbol(t *testing.T) {
	b, err := (&mgmtNode{}).fail(modelerr.LockLost()).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var decoded amqp.Message
	if err := decoded.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if v, _ := mapGet(decoded.ApplicationProperties, "errorCondition"); v != condLockLost {
		t.Errorf("errorCondition encoded as %#v (%T), want the symbol %s", v, v, condLockLost)
	}
}
