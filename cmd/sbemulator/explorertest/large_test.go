package explorertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
	"github.com/sbkit/sbkit/sbtest"
)

// Sizes of the large namespace: the service's quota of queues and topics per namespace
// ("Service Bus quotas": 10,000 for the Basic and Standard tiers), one of which holds
// bigMessages messages.
const (
	largeEntities = 10_000
	bigMessages   = 100_000
)

// largeServer serves a namespace of largeEntities queues, "big" holding bigMessages
// messages, through sbtest.NewServer with the plain-HTTP administration listener.
func largeServer(t *testing.T) *sbtest.Server {
	t.Helper()
	ns := sbtest.NewNamespace(nil)
	for i := range largeEntities - 1 {
		if _, err := ns.NewQueue(fmt.Sprintf("queue-%05d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ns.NewQueue("big", nil); err != nil {
		t.Fatal(err)
	}
	s, err := ns.NewSender("big", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for sent := 0; sent < bigMessages; {
		b, err := s.NewBatch(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for ; sent < bigMessages; sent++ {
			m := &azservicebus.Message{
				Body:                  fmt.Appendf(nil, `{"order": %d, "total": %d.25, "items": ["book", "pen", "lamp"]}`, sent, sent%500),
				ContentType:           new("application/json"),
				Subject:               new("created"),
				ApplicationProperties: map[string]any{"tenant": "contoso", "n": int64(sent)},
			}
			if err := b.AddMessage(m, nil); err != nil {
				break // full: send this batch
			}
		}
		if err := s.SendBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := sbtest.NewServer(&sbtest.ServerOptions{Addr: "127.0.0.1:0", AdminHTTPAddr: "127.0.0.1:0", Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	return srv
}

// median runs f n times and returns the median duration.
func median(n int, f func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		f()
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2]
}

// The page with 10,000 entities and a queue of 100,000 messages: it shows the first
// page of entities and of messages, pages on, and filters. The times are logged (the
// numbers in docs/emulator.md come from here), not asserted: the page is paged, so what
// it renders does not grow with the namespace.
func TestExplorerLargeNamespace(t *testing.T) {
	if testing.Short() {
		t.Skip("the large namespace takes a few seconds to fill")
	}
	ctx := newBrowser(t)
	fill := time.Now()
	srv := largeServer(t)
	t.Logf("filled %d entities and %d messages in %v", largeEntities, bigMessages, time.Since(fill).Round(time.Millisecond))
	base := srv.AdminHTTPURL()

	// The JSON API alone, from Go: a page of entities, the first and the last page of
	// messages.
	apiGet := func(path string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		resp.Body.Close()
	}
	t.Logf("API: namespace page (100 of %d entities): median %v", largeEntities, median(9, func() { apiGet("/$explorer/api/namespace?top=100") }))
	t.Logf("API: namespace filtered to one entity: median %v", median(9, func() { apiGet("/$explorer/api/namespace?filter=queue-09999") }))
	t.Logf("API: first page of 50 messages of %d: median %v", bigMessages, median(9, func() { apiGet("/$explorer/api/messages?path=big&top=50") }))
	t.Logf("API: last page of 50 messages: median %v", median(9, func() { apiGet(fmt.Sprintf("/$explorer/api/messages?path=big&top=50&from=%d", bigMessages-50)) }))

	// First paint and the first page of entities rendered, from the navigation's start.
	start := time.Now()
	do(t, ctx, "opening the page", chromedp.Navigate(base+"/"))
	waitFor(t, ctx, "the entities", `document.body.dataset.nsLoaded !== undefined`, `document.body.dataset.nsLoaded`)
	wall := time.Since(start)
	fcp := eval[float64](t, ctx, `(performance.getEntriesByName("first-contentful-paint")[0] || {startTime: -1}).startTime`)
	rows := eval[float64](t, ctx, `Number(document.body.dataset.nsLoaded)`)
	if n := eval[int](t, ctx, `document.querySelectorAll("#entities tbody tr").length`); n != 100 {
		t.Fatalf("%d rows on the first page, want 100", n)
	}
	if s := eval[string](t, ctx, `document.querySelector("#ns-summary").textContent`); s != "1–100 of 10,000 entities" {
		t.Errorf("summary %q", s)
	}
	t.Logf("browser: first contentful paint %.0f ms, first 100 of %d entities rendered at %.0f ms (navigation to rendered, from Go: %v)", fcp, largeEntities, rows, wall.Round(time.Millisecond))
	screenshot(t, ctx, "explorer-large.png", false)

	// Filtering the 10,000 names.
	// The filter as if pasted: one input event, answered after the page's 150 ms
	// typing delay.
	before := eval[float64](t, ctx, `(() => { const f = document.querySelector("#filter"); f.value = "queue-0123"; f.dispatchEvent(new Event("input")); return performance.now(); })()`)
	waitFor(t, ctx, "the filter", `document.querySelectorAll("#entities tbody tr").length === 10`, `document.querySelectorAll("#entities tbody tr").length`)
	t.Logf("browser: filter to 10 of %d entities: %.0f ms after the input (150 ms of it the page's typing delay)", largeEntities, eval[float64](t, ctx, `Number(document.body.dataset.nsLoaded)`)-before)

	// A page of messages of the 100,000, and the next one.
	before = eval[float64](t, ctx, `performance.now()`)
	do(t, ctx, "opening big", chromedp.Navigate(base+"/#/entity/big"))
	waitFor(t, ctx, "the first page of messages", `document.querySelectorAll("#messages tbody tr[data-seq]").length === 50`, `document.querySelectorAll("#messages tbody tr").length`)
	t.Logf("browser: entity view with its first 50 of %d messages: %.0f ms", bigMessages, eval[float64](t, ctx, `Number(document.body.dataset.messagesLoaded)`)-before)
	if c := eval[string](t, ctx, countOf("active")); c != "100,000" {
		t.Errorf("active count shows %q", c)
	}
	screenshot(t, ctx, "explorer-messages.png", false)
	before = eval[float64](t, ctx, `performance.now()`)
	do(t, ctx, "next page", chromedp.Click(chromedp.CSS("#msg-next")))
	waitFor(t, ctx, "the second page", `(document.querySelector("#messages tbody tr[data-seq]") || {dataset: {}}).dataset.seq === "51"`, `document.querySelector("#messages tbody tr").dataset.seq`)
	t.Logf("browser: next page of 50 messages: %.0f ms", eval[float64](t, ctx, `Number(document.body.dataset.messagesLoaded)`)-before)
	before = eval[float64](t, ctx, `performance.now()`)
	do(t, ctx, "a message", chromedp.Click(chromedp.CSS(`#messages tbody tr[data-seq="60"] td:nth-child(3)`)))
	waitFor(t, ctx, "the message", `document.querySelector("#message-title").textContent === "Message 60"`, `document.querySelector("#message-title").textContent`)
	t.Logf("browser: one message with its whole body: %.0f ms", eval[float64](t, ctx, `performance.now()`)-before)
}
