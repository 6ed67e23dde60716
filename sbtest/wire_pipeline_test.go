package sbtest

import (
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestServerPipelinesSends checks that concurrent sends through one SDK sender overlap
// inside the server under the 7 ms / 1 ms latency model, as they do in memory: the
// broker sees many in flight at once, and 64 sends take far less than 64 round trips.
func TestServerPipelinesSends(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{
		Queues:           map[string]*EntityOptions{"q": nil},
		NamespaceOptions: &NamespaceOptions{Latency: Latency{RoundTrip: 7 * time.Millisecond, StoreTime: time.Millisecond}},
	})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("warm-up")}, nil); err != nil {
		t.Fatal(err)
	}
	const n = 64
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	q, _ := w.srv.Namespace().Entity("q")
	st := q.Stats()
	t.Logf("%d concurrent sends in %v (%.0f msgs/s; sequential would take %v); peak in flight %d",
		n, elapsed, n/elapsed.Seconds(), n*8*time.Millisecond, st.PeakInFlightSends)
	if st.Sent != n+1 {
		t.Fatalf("sent %d, want %d", st.Sent, n+1)
	}
	if st.PeakInFlightSends < n/4 {
		t.Fatalf("peak in-flight sends %d: the server does not overlap pipelined sends", st.PeakInFlightSends)
	}
}
