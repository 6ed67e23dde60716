package sbtest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/explorer"
)

// The explorer's JSON API over a namespace of 10,000 queues (the Standard tier's quota of
// queues and topics, "Service Bus quotas"), one of which, "big", holds 100,000 messages:
// what a page of entities and a page of messages cost on the server, whatever the
// browser adds (cmd/sbemulator/explorertest measures the page itself).

var (
	largeOnce sync.Once
	largeNS   *Namespace
)

// largeNamespace returns the namespace, filled once per test binary.
func largeNamespace(b *testing.B) *Namespace {
	largeOnce.Do(func() {
		ns := NewNamespace(nil)
		for i := range 9_999 {
			if _, err := ns.NewQueue(fmt.Sprintf("queue-%05d", i), nil); err != nil {
				panic(err)
			}
		}
		if _, err := ns.NewQueue("big", nil); err != nil {
			panic(err)
		}
		s, _ := ns.NewSender("big", nil)
		ms := make([]*azservicebus.Message, 100_000)
		for i := range ms {
			ms[i] = &azservicebus.Message{Body: fmt.Appendf(nil, `{"order": %d}`, i), ApplicationProperties: map[string]any{"n": int64(i)}}
		}
		for _, m := range ms {
			if err := s.SendMessage(context.Background(), m, nil); err != nil {
				panic(err)
			}
		}
		largeNS = ns
	})
	return largeNS
}

func benchmarkExplorerGet(b *testing.B, query string) {
	ns := largeNamespace(b)
	h := explorer.New(explorerModel{adminModel{ns}})
	req := httptest.NewRequest(http.MethodGet, "/$explorer/api/"+query, nil)
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", query, w.Code, w.Body)
		}
	}
}

func BenchmarkExplorerNamespacePage(b *testing.B) { benchmarkExplorerGet(b, "namespace?top=100") }
func BenchmarkExplorerNamespaceFilter(b *testing.B) {
	benchmarkExplorerGet(b, "namespace?filter=queue-0123")
}
func BenchmarkExplorerMessagesFirstPage(b *testing.B) {
	benchmarkExplorerGet(b, "messages?path=big&top=50")
}
func BenchmarkExplorerMessagesMiddlePage(b *testing.B) {
	benchmarkExplorerGet(b, "messages?path=big&top=50&from=50000")
}
func BenchmarkExplorerMessagesLastPage(b *testing.B) {
	benchmarkExplorerGet(b, "messages?path=big&top=50&from=99951")
}
