package wire

import (
	"testing"
)

// linkAddress reads every spelling of a link address the SDKs use (see sbtest's
// TestServerAddressSpellings) as the node path the server keeps.
func TestLinkAddress(t *testing.T) {
	for in, want := range map[string]string{
		"q": "q", "amqps://ns.servicebus.windows.net/q": "q", "amqp://h:5672/t/Subscriptions/s/$DeadLetterQueue": "t/Subscriptions/s/$DeadLetterQueue",
		"sb://h": "", "$cbs": "$cbs", "q/$management": "q/$management", "/q/": "q", "amqps://h/q/": "q",
		"t/subscriptions/s/$deadletterqueue": "t/Subscriptions/s/$DeadLetterQueue", "q/$MANAGEMENT": "q/$management",
		"q/$transfer/$deadletterqueue": "q/$Transfer/$DeadLetterQueue", "subscriptions": "subscriptions",
	} {
		if got := linkAddress(in); got != want {
			t.Errorf("linkAddress(%q) = %q, want %q", in, got, want)
		}
	}
}
