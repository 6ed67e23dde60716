// Package explorertest tests sbemulator's explorer page in a real browser: headless
// Chromium driven by chromedp over the DevTools protocol. It is a module of its own so
// that the core never requires chromedp.
//
// Chromium is found as SBKIT_CHROMIUM, else chromium, chromium-browser, google-chrome
// or google-chrome-stable on PATH (Debian: apt-get install chromium; .ci/run installs
// it). Without it the tests skip with a message, except under CI=true, where they
// fail. SBKIT_EXPLORER_SCREENSHOTS=DIR writes the screenshots docs/emulator.md shows
// into DIR.
package explorertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/chromedp/chromedp"
)

// chromium returns the browser to run, or skips (fails under CI=true) without one.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SBKIT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "no Chromium: install Debian's chromium package (apt-get install chromium) or set SBKIT_CHROMIUM"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (required under CI=true)")
	}
	t.Skip(msg)
	return ""
}

// newBrowser starts headless Chromium with a fresh profile and returns a tab's context;
// the browser stops at the end of the test. Running as root needs --no-sandbox; the
// other flags keep it from reaching the network for updates, sync or field trials.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser outside any timeout
		t.Fatalf("starting %s: %v", chromium(t), err)
	}
	return ctx
}

// do runs steps within a minute.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the JavaScript expression expr is true, failing the test with
// what and the value of show after 20 s.
func waitFor(t *testing.T, ctx context.Context, what, expr, show string) {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	if _, err := chromedp.Run(pctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting for %s: %v (now %s)", what, err, eval[string](t, ctx, "String("+show+")"))
	}
}

// screenshot writes the page (the whole page when full, else the window) to
// SBKIT_EXPLORER_SCREENSHOTS/name when that is set.
func screenshot(t *testing.T, ctx context.Context, name string, full bool) {
	t.Helper()
	dir := os.Getenv("SBKIT_EXPLORER_SCREENSHOTS")
	if dir == "" {
		return
	}
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// emulator is a running sbemulator binary.
type emulator struct {
	conn, http string
}

// startEmulator builds cmd/sbemulator (this tree's) and starts it with Config.json on
// free ports and args; it is stopped with SIGTERM at the end of the test.
func startEmulator(t *testing.T, args ...string) emulator {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sbemulator")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".." // cmd/sbemulator, in the core's module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"-config", "Config.json", "-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("sbemulator did not stop cleanly: %v", err)
		}
	})
	lines := make(chan string, 16)
	go scanLines(stdout, lines, nil)
	explorerURL := make(chan string, 1)
	go scanLines(stderr, nil, explorerURL)
	var e emulator
	select {
	case e.conn = <-lines:
	case <-time.After(30 * time.Second):
		t.Fatal("sbemulator printed no connection string")
	}
	select {
	case e.http = <-explorerURL:
	case <-time.After(10 * time.Second):
		t.Fatal("sbemulator printed no explorer URL")
	}
	return e
}

var explorerLine = regexp.MustCompile(`explorer on (http://\S+?)/,`)

// scanLines sends r's lines to lines, and the explorer's URL, once, to url.
func scanLines(r io.Reader, lines chan<- string, url chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if lines != nil {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		if m := explorerLine.FindStringSubmatch(sc.Text()); m != nil && url != nil {
			url <- m[1]
			url = nil
		}
	}
}

// countOf is a JavaScript expression: the count labelled label in the entity view.
func countOf(label string) string {
	return `(document.querySelector('#entity-counts [data-count="` + label + `"] b') || {}).textContent`
}

// rowCell is a JavaScript expression: the text of cell n (1-based) of the namespace
// view's row of path.
func rowCell(path string, n int) string {
	return fmt.Sprintf(`(document.querySelector('#entities tr[data-path="%s"] td:nth-child(%d)') || {}).textContent`, path, n)
}

// The page as a person uses it, against the sbemulator binary started with a
// Config.json: the namespace and its counts, an entity and its rules, a message sent
// from the page, a dead letter made through the SDK and re-driven from the page, and
// a purge; what the page did is checked through the SDK.
func TestExplorerInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	emu := startEmulator(t)
	client, err := azservicebus.NewClientFromConnectionString(emu.conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sender, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		body := fmt.Sprintf(`{"order": %d, "total": %d.50, "items": ["book", "pen"]}`, 1000+i, 10*(i+1))
		if err := sender.SendMessage(sctx, &azservicebus.Message{
			MessageID: new(fmt.Sprintf("order-%d", 1000+i)), Body: []byte(body), ContentType: new("application/json"),
			Subject: new("created"), ApplicationProperties: map[string]any{"tenant": "contoso", "priority": int64(i)},
		}, nil); err != nil {
			t.Fatal(err)
		}
	}

	// The namespace view lists every entity of Config.json with its counts.
	do(t, ctx, "opening the page", chromedp.Navigate(emu.http+"/"), chromedp.WaitVisible(chromedp.CSS(`#entities tr[data-path="orders"]`)))
	waitFor(t, ctx, "orders' active count", rowCell("orders", 4)+` === "3"`, rowCell("orders", 4))
	for _, p := range []string{"payments", "sessions", "events", "events/Subscriptions/audit", "events/Subscriptions/billing", "events/Subscriptions/urgent"} {
		if !eval[bool](t, ctx, `!!document.querySelector('#entities tr[data-path="`+p+`"]')`) {
			t.Errorf("the namespace view has no row for %s", p)
		}
	}
	screenshot(t, ctx, "explorer-namespace.png", true)
	do(t, ctx, "filtering", chromedp.SendKeys(chromedp.CSS("#filter"), "urg"))
	waitFor(t, ctx, "the filter", `document.querySelectorAll("#entities tbody tr").length === 1`, `document.querySelectorAll("#entities tbody tr").length`)
	do(t, ctx, "opening a subscription", chromedp.Click(chromedp.CSS(`#entities tr[data-path="events/Subscriptions/urgent"]`)),
		chromedp.WaitVisible(chromedp.CSS("#rules .rule")))
	if rule := eval[string](t, ctx, `document.querySelector("#rules").textContent`); !strings.Contains(rule, "priority = 'high'") || !strings.Contains(rule, "SET routed = 'urgent'") {
		t.Errorf("the rule shows %q", rule)
	}

	// The entity view of orders; a message sent from the page changes its count.
	do(t, ctx, "opening orders", chromedp.Navigate(emu.http+"/#/entity/orders"), chromedp.WaitVisible(chromedp.CSS(`#messages tbody tr[data-seq]`)))
	waitFor(t, ctx, "the active count", countOf("active")+` === "3"`, countOf("active"))
	do(t, ctx, "sending from the page",
		chromedp.SetValue(chromedp.CSS("#send-body"), `{"order": 2000, "total": 99.90}`),
		chromedp.SetValue(chromedp.CSS("#send-id"), "order-2000"),
		chromedp.SetValue(chromedp.CSS("#send-subject"), "created"),
		chromedp.Click(chromedp.CSS("#send-add-prop")),
		chromedp.SetValue(chromedp.CSS("#send-props .prop-name"), "tenant"),
		chromedp.SetValue(chromedp.CSS("#send-props .prop-value"), "fabrikam"),
		chromedp.Click(chromedp.CSS("#send-submit")))
	waitFor(t, ctx, "the active count after the send", countOf("active")+` === "4"`, countOf("active"))

	// Dead-letter one through the SDK; the page's live refresh shows it.
	receiver, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := receiver.ReceiveMessages(sctx, 1, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("receive: %v, %v", got, err)
	}
	deadID := got[0].MessageID
	if err := receiver.DeadLetterMessage(sctx, got[0], &azservicebus.DeadLetterOptions{Reason: new("PaymentDeclined"), ErrorDescription: new("the card expired")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the dead-lettered count", countOf("dead-lettered")+` === "1" && `+countOf("active")+` === "3"`, countOf("dead-lettered"))
	do(t, ctx, "browsing the dead letters", chromedp.Click(chromedp.CSS("#tab-dlq")))
	waitFor(t, ctx, "the dead letter's row", `(document.querySelector("#messages tbody tr[data-seq] td.dl") || {}).textContent === "PaymentDeclined"`, `document.querySelector("#messages tbody").textContent`)
	do(t, ctx, "opening the dead letter", chromedp.Click(chromedp.CSS("#messages tbody tr[data-seq] td:nth-child(3)")), chromedp.WaitVisible(chromedp.CSS("#message-card")))
	waitFor(t, ctx, "the message's properties", `document.querySelector("#message-sys").textContent.includes("the card expired")`, `document.querySelector("#message-sys").textContent`)
	if body := eval[string](t, ctx, `document.querySelector("#message-body").textContent`); !strings.Contains(body, "\"order\": 1000") || !strings.Contains(body, "\n") {
		t.Errorf("the JSON body shows %q, want it indented", body)
	}
	hex := eval[string](t, ctx, `(() => { const s = document.querySelector("#body-mode"); s.value = "hex"; s.dispatchEvent(new Event("change")); return document.querySelector("#message-body").textContent; })()`)
	if !strings.HasPrefix(hex, "00000000  7b 22 6f 72 64 65 72 22") {
		t.Errorf("the body in hex shows %q", hex)
	}
	eval[bool](t, ctx, `(() => { const s = document.querySelector("#body-mode"); s.value = "auto"; s.dispatchEvent(new Event("change")); return true; })()`)
	if app := eval[string](t, ctx, `document.querySelector("#message-app").textContent`); !strings.Contains(app, "contoso") || !strings.Contains(app, "long") {
		t.Errorf("the application properties show %q", app)
	}
	screenshot(t, ctx, "explorer-dead-letter.png", true)

	// Re-drive it from the page: the copy is back in orders, the dead letter gone.
	do(t, ctx, "re-driving the selected dead letter",
		chromedp.Click(chromedp.CSS("#messages tbody tr[data-seq] input[type=checkbox]")),
		chromedp.Click(chromedp.CSS("#redrive-selected")),
		chromedp.WaitVisible(chromedp.CSS("#confirm-yes")),
		chromedp.Click(chromedp.CSS("#confirm-yes")))
	waitFor(t, ctx, "the counts after the re-drive", countOf("dead-lettered")+` === "0" && `+countOf("active")+` === "4"`, countOf("dead-lettered")+"+'/'+"+countOf("active"))
	peeked, err := receiver.PeekMessages(sctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64(0))})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range peeked {
		ids = append(ids, m.MessageID)
		if m.MessageID == deadID && (m.DeadLetterReason != nil || m.ApplicationProperties["tenant"] != "contoso") {
			t.Errorf("the re-driven copy %+v", m)
		}
	}
	if strings.Join(ids, " ") != "order-1001 order-1002 order-2000 "+deadID {
		t.Errorf("orders holds %q after the re-drive", ids)
	}
	dlq, err := client.NewReceiverForQueue("orders", &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
	if err != nil {
		t.Fatal(err)
	}
	if left, err := dlq.PeekMessages(sctx, 10, nil); err != nil || len(left) != 0 {
		t.Errorf("dead-letter queue after the re-drive: %d messages, %v", len(left), err)
	}

	// Purge from the page: the SDK peeks nothing.
	do(t, ctx, "purging", chromedp.Click(chromedp.CSS("#tab-main")))
	waitFor(t, ctx, "the main tab", `document.querySelector("#tab-main").classList.contains("on")`, `location.hash`)
	do(t, ctx, "purging", chromedp.Click(chromedp.CSS("#purge")), chromedp.WaitVisible(chromedp.CSS("#confirm-yes")), chromedp.Click(chromedp.CSS("#confirm-yes")))
	waitFor(t, ctx, "the counts after the purge", countOf("active")+` === "0"`, countOf("active"))
	if left, err := receiver.PeekMessages(sctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64(0))}); err != nil || len(left) != 0 {
		t.Errorf("orders after the purge: %d messages, %v", len(left), err)
	}
	// The live refresh may show the counts before the purge's answer: wait for it.
	waitFor(t, ctx, "the purge's report", `document.querySelector("#status").textContent.includes("Purged 4 messages")`, `document.querySelector("#status").textContent`)
	_ = receiver.Close(context.Background())
	_ = dlq.Close(context.Background())
}

// With -sas-key the page loads, asks for the connection string, signs namespace-wide
// tokens with it in the browser, and shows the namespace; the API refuses it nothing
// then.
func TestExplorerInBrowserWithSAS(t *testing.T) {
	ctx := newBrowser(t)
	emu := startEmulator(t, "-sas-key", "admin=c2VjcmV0LWtleQ==")
	if !strings.Contains(emu.conn, "SharedAccessKeyName=admin") || !strings.Contains(emu.conn, "SharedAccessKey=c2VjcmV0LWtleQ==") {
		t.Fatalf("connection string %q", emu.conn)
	}
	do(t, ctx, "opening the page", chromedp.Navigate(emu.http+"/"), chromedp.WaitVisible(chromedp.CSS("#auth-input")))
	if n := eval[int](t, ctx, `document.querySelectorAll("#entities tr[data-path]").length`); n != 0 {
		t.Fatalf("%d entities shown without a token", n)
	}
	do(t, ctx, "giving the connection string", chromedp.SetValue(chromedp.CSS("#auth-input"), emu.conn), chromedp.Click(chromedp.CSS("#auth-use")))
	waitFor(t, ctx, "the entities", `!!document.querySelector('#entities tr[data-path="orders"]')`, `document.querySelector("#status").textContent`)
	do(t, ctx, "sending from the page", chromedp.Navigate(emu.http+"/#/entity/payments"), chromedp.WaitVisible(chromedp.CSS("#send-submit")),
		chromedp.Click(chromedp.CSS("#send-submit")))
	waitFor(t, ctx, "the active count after the send", countOf("active")+` === "1"`, countOf("active")+` + " " + document.querySelector("#status").textContent`)
}
