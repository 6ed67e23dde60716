package scenario

import "testing"

// scenario is one end-to-end check run against a Backend.
type scenario struct {
	name string
	run  func(t *testing.T, b Backend)
}

// scenarios are every scenario of the suite, by area.
var scenarios = []scenario{
	{"sender/pipelined", senderDelivers(false)},
	{"sender/batched", senderDelivers(true)},
	{"sender/too-large/pipelined", senderTooLarge(false)},
	{"sender/too-large/batched", senderTooLarge(true)},
	{"processor/complete", processorComplete},
	{"processor/abandon-redelivers", processorAbandon},
	{"processor/dead-letter", processorDeadLetter},
	{"processor/max-delivery-count", processorMaxDeliveryCount},
	{"processor/close-abandons", processorCloseAbandons},
	{"processor/lock-renewal", processorLockRenewal},
	{"dedupe/same-message-id", dedupeSameMessageID},
	{"serialize/typed-json", serializeTypedJSON},
	{"serialize/undecodable", serializeUndecodable},
}

// Run runs every scenario against b, each as a subtest of t named after it
// ("sender/batched", "processor/lock-renewal", ...), in parallel when b allows.
func Run(t *testing.T, b Backend) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if b.Parallel() {
				t.Parallel()
			}
			sc.run(t, b)
		})
	}
}
