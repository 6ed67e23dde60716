package scenario

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/dedupe"
	"github.com/sbkit/sbkit/receiver"
)

// dedupeSameMessageID: a message sent twice under the same MessageId runs the handler
// once; the second delivery is completed as a duplicate without running it.
func dedupeSameMessageID(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	p := q.Properties()
	if !p.Known {
		t.Skip("needs to know whether the queue detects duplicates itself")
	}
	// A queue with duplicate detection drops the second copy before any receiver sees it.
	deliveries := int64(3)
	if p.DuplicateDetection {
		deliveries = 2
	}
	sendAll(t, q.NewSender(t), message("dup", "first copy"), message("dup", "second copy"), message("other", "x"))
	store, err := dedupe.NewMemoryStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := dedupe.New(store, &dedupe.Options{Entity: q.Name()})
	if err != nil {
		t.Fatal(err)
	}
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	rec := &recorder{}
	pr := startProcessor(t, r, sbkit.Chain(rec.wrap(ok), f.Middleware()), receiver.Options{})
	waitFor(t, "every delivery completed", func() bool { return pr.p.Stats().Completed == deliveries })
	st := pr.stop(t, waitTimeout)
	calls := rec.byID()
	if calls["dup"] != 1 || calls["other"] != 1 || len(calls) != 2 {
		t.Errorf("handler calls by MessageID %v, want dup and other once each", calls)
	}
	if c := rec.snapshot(); len(c) > 0 && c[0].MessageID == "dup" && c[0].Body != "first copy" {
		t.Errorf("the handler ran on the %q, want the first copy", c[0].Body)
	}
	if st.Received != deliveries || st.Completed != deliveries || st.Skipped != deliveries-2 {
		t.Errorf("stats %+v, want %d received and completed, %d skipped", st, deliveries, deliveries-2)
	}
	if fs := f.Stats(); fs.DuplicatesSkipped != deliveries-2 || fs.Succeeded != 2 {
		t.Errorf("dedupe stats %+v, want %d duplicates and 2 successes", fs, deliveries-2)
	}
	expectEmpty(t, q, r)
}
