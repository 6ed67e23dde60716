package scenario

import (
	"sync"
	"testing"
)

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
	{"sender/scheduled", senderScheduled},
	{"processor/complete", processorComplete},
	{"processor/abandon-redelivers", processorAbandon},
	{"processor/dead-letter", processorDeadLetter},
	{"processor/max-delivery-count", processorMaxDeliveryCount},
	{"processor/close-abandons", processorCloseAbandons},
	{"processor/lock-renewal", processorLockRenewal},
	{"processor/lock-expiry", processorLockExpiry},
	{"processor/defer", processorDefer},
	{"dedupe/same-message-id", dedupeSameMessageID},
	{"serialize/typed-json", serializeTypedJSON},
	{"serialize/undecodable", serializeUndecodable},
	{"ttl/expiry", ttlExpiry},
	{"fidelity/missing-entity", missingEntity},
	{"fidelity/locks-survive-close", locksSurviveClose},
	{"fidelity/delivery-count", deliveryCount},
	{"fidelity/deferred-strict", deferredStrict},
	{"fidelity/scheduled-sequence", scheduledSequence},
	{"fidelity/raw-amqp", rawAMQP},
	{"sessions/in-order", sessionsInOrder},
	{"sessions/state", sessionsState},
	{"sessions/lock-renewal", sessionsLockRenewal},
	{"sessions/lock-loss", sessionsLockLoss},
	{"sessions/request-reply", sessionsRequestReply},
	{"admin/crud", adminCRUD},
	{"admin/filters", adminFilters},
	{"admin/forwarding", adminForwarding},
	{"admin/runtime-counts", adminRuntimeCounts},
	{"sessions/processor-fifo", sessionsProcessorFIFO},
	{"sessions/processor-lock-renewal", sessionsProcessorLockRenewal},
}

// Run runs every scenario against b, each as a subtest of t named after it
// ("sender/batched", "processor/lock-renewal", ...). When b allows, all run at once:
// scenarios spend their time waiting for the broker, not computing, so they are started
// on goroutines of their own rather than with t.Parallel, whose limit (-parallel,
// GOMAXPROCS by default) would serialise them on a small machine. Run returns when every
// scenario has.
func Run(t *testing.T, b Backend) {
	var wg sync.WaitGroup
	for _, sc := range scenarios {
		run := func() { t.Run(sc.name, func(t *testing.T) { sc.run(t, b) }) }
		if b.Parallel() {
			wg.Go(run)
		} else {
			run()
		}
	}
	wg.Wait()
}
