package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// These tests build the sbctl binary and run it as a user would, against sbtest.NewServer:
// the real SDK inside sbctl talks AMQP (and the administration API over HTTPS) to it.

var sbctlBin string

func TestMain(m *testing.M) {
	if os.Getenv(fakeCredentialEnv) != "" {
		os.Exit(m.Run()) // a child of TestNamespaceCredentialAndHost: no binary needed
	}
	dir, err := os.MkdirTemp("", "sbctl-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sbctlBin = filepath.Join(dir, "sbctl")
	if out, err := exec.Command("go", "build", "-o", sbctlBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// sbctl runs the binary with args against srv (its connection string in the
// environment, its certificate trusted for the administration API).
func sbctl(t *testing.T, srv *sbtest.Server, stdin string, args ...string) result {
	t.Helper()
	return runSbctl(t, []string{"SERVICEBUS_CONNECTION_STRING=" + srv.ConnectionString(), "SBCTL_ADMIN_CA=" + certFile(t, srv)}, stdin, args...)
}

// runSbctl runs the binary with args, env added to this process's environment and
// stdin as its input, and returns its exit code and output.
func runSbctl(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sbctlBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

func certFile(t *testing.T, srv *sbtest.Server) string {
	p := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(p, srv.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, r result, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// deadLetter sends n messages to the queue (or topic) dst and dead-letters them from the
// entity e with reason(i), through the model.
func deadLetter(t *testing.T, ns *sbtest.Namespace, dst string, e *sbtest.Entity, n int, session func(int) string, reason func(int) string) {
	t.Helper()
	ctx := context.Background()
	s, err := ns.NewSender(dst, nil)
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]bool{}
	for i := range n {
		m := &azservicebus.Message{Body: []byte(fmt.Sprintf("body %d", i)), MessageID: new(fmt.Sprintf("m%03d", i)), ApplicationProperties: map[string]any{"i": int64(i)}}
		if session != nil {
			m.SessionID = new(session(i))
			sessions[session(i)] = true
		}
		if err := s.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	name := e.Name()
	topic, sub := "", name
	if tp := e.Topic(); tp != nil {
		topic, sub = tp.Name(), name[strings.LastIndex(name, "/")+1:]
	}
	settle := func(r interface {
		ReceiveMessages(context.Context, int, *azservicebus.ReceiveMessagesOptions) ([]*azservicebus.ReceivedMessage, error)
		DeadLetterMessage(context.Context, *azservicebus.ReceivedMessage, *azservicebus.DeadLetterOptions) error
	}) {
		for {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			ms, _ := r.ReceiveMessages(rctx, 100, nil)
			cancel()
			if len(ms) == 0 {
				return
			}
			for _, m := range ms {
				var i int
				fmt.Sscanf(m.MessageID, "m%d", &i)
				if err := r.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: new(reason(i)), ErrorDescription: new("failed")}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if session != nil {
		for id := range sessions {
			sr, err := ns.AcceptSessionForQueue(ctx, name, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			settle(sr)
			_ = sr.Close(ctx)
		}
	} else {
		var r *sbtest.Receiver
		if topic != "" {
			r, err = ns.NewReceiverForSubscription(topic, sub, nil)
		} else {
			r, err = ns.NewReceiverForQueue(name, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		settle(r)
		_ = r.Close(ctx)
	}
	if got := e.Counts().DeadLetter; got != n {
		t.Fatalf("%d dead letters, want %d", got, n)
	}
}

func TestQueueEndToEnd(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"orders": nil, "replay": nil}})
	ns := srv.Namespace()
	q, _ := ns.Entity("orders")
	deadLetter(t, ns, "orders", q, 120, nil, func(i int) string {
		return map[bool]string{true: "Poison", false: "MaxDeliveryCountExceeded"}[i%4 == 0]
	})

	r := must(t, sbctl(t, srv, "", "dlq", "summary", "--queue", "orders"), 0)
	if !strings.Contains(r.stdout, "120 dead letters") || !strings.Contains(r.stdout, "Poison") {
		t.Fatalf("summary:\n%s", r.stdout)
	}
	r = must(t, sbctl(t, srv, "", "dlq", "summary", "--queue", "orders", "--json"), 0)
	var sum struct {
		Summary struct {
			Count    int64
			ByReason map[string]int64
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || sum.Summary.ByReason["Poison"] != 30 {
		t.Fatalf("summary --json %s: %v", r.stdout, err)
	}
	r = must(t, sbctl(t, srv, "", "dlq", "list", "--queue", "orders", "--reason", "Poison", "--json"), 0)
	if n := strings.Count(r.stdout, "\n"); n != 30 {
		t.Fatalf("list: %d lines", n)
	}

	// Export by peek, then import to another queue.
	file := filepath.Join(t.TempDir(), "dlq.jsonl")
	must(t, sbctl(t, srv, "", "dlq", "export", "--queue", "orders", "-o", file), 0)
	if q.Counts().DeadLetter != 120 {
		t.Fatal("export by peek changed the queue")
	}
	r = must(t, sbctl(t, srv, "", "dlq", "import", "--queue", "replay", "-i", file, "--json"), 0)
	replay, _ := ns.Entity("replay")
	if replay.Counts().Active != 120 {
		t.Fatalf("import: %s, %+v", r.stdout, replay.Counts())
	}

	// Re-drive: a dry run changes nothing, then the Poison ones move back.
	r = must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "orders", "--reason", "Poison", "--dry-run", "--json"), 0)
	if !strings.Contains(r.stdout, `"moved":30`) || q.Counts().DeadLetter != 120 {
		t.Fatalf("dry run: %s %+v", r.stdout, q.Counts())
	}
	r = must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "orders", "--reason", "Poison", "--idle-timeout", "2s"), 0)
	if c := q.Counts(); c.DeadLetter != 90 || c.Active != 30 {
		t.Fatalf("redrive: %s %+v", r.stdout, c)
	}
	// Purge: a dry run, then by filter, then all.
	must(t, sbctl(t, srv, "", "dlq", "purge", "--queue", "orders", "--dry-run"), 0)
	if q.Counts().DeadLetter != 90 {
		t.Fatal("purge --dry-run deleted")
	}
	must(t, sbctl(t, srv, "", "dlq", "purge", "--queue", "orders", "--message-id", "m001", "--message-id", "m002"), 0)
	if q.Counts().DeadLetter != 88 {
		t.Fatalf("filtered purge: %+v", q.Counts())
	}
	r = must(t, sbctl(t, srv, "", "dlq", "purge", "--queue", "orders", "--json"), 0)
	if q.Counts().DeadLetter != 0 || !strings.Contains(r.stdout, `"moved":88`) {
		t.Fatalf("purge: %s %+v", r.stdout, q.Counts())
	}

	// Peek, send, stats.
	must(t, sbctl(t, srv, "", "send", "--queue", "orders", "--body", "hello", "--count", "3", "--property", "k=v"), 0)
	r = must(t, sbctl(t, srv, "", "peek", "--queue", "orders", "--max", "100", "--json"), 0)
	if n := strings.Count(r.stdout, "\n"); n != 33 {
		t.Fatalf("peek: %d lines", n)
	}
	r = must(t, sbctl(t, srv, "", "stats", "--json"), 0)
	var found bool
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var e entityStats
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if e.Name == "orders" && e.Active == 33 {
			found = true
		}
	}
	if !found {
		t.Fatalf("stats:\n%s", r.stdout)
	}
}

func TestSubscriptionEndToEnd(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Topics: map[string]sbtest.TopicOptions{"events": {Subscriptions: map[string]*sbtest.EntityOptions{"audit": nil, "billing": nil}}}})
	ns := srv.Namespace()
	tp, _ := ns.Topic("events")
	audit, _ := tp.Subscription("audit")
	billing, _ := tp.Subscription("billing")
	deadLetter(t, ns, "events", audit, 40, nil, func(int) string { return "x" })
	for billing.Counts().Active > 0 { // billing got the messages too: take them away
		r, _ := ns.NewReceiverForSubscription("events", "billing", &sbtest.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
		_, _ = r.ReceiveMessages(context.Background(), 100, nil)
		_ = r.Close(context.Background())
	}
	r := must(t, sbctl(t, srv, "", "dlq", "redrive", "--topic", "events", "--subscription", "audit"), 2)
	if !strings.Contains(r.stderr, "--apply-rules") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	must(t, sbctl(t, srv, "", "dlq", "redrive", "--topic", "events", "--subscription", "audit", "--apply-rules", "--idle-timeout", "2s"), 0)
	if audit.Counts().Active != 40 || audit.Counts().DeadLetter != 0 || billing.Counts().Active != 0 {
		t.Fatalf("audit %+v, billing %+v", audit.Counts(), billing.Counts())
	}
}

func TestSessionQueueEndToEnd(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"jobs": {RequiresSession: true}}})
	ns := srv.Namespace()
	q, _ := ns.Entity("jobs")
	deadLetter(t, ns, "jobs", q, 30, func(i int) string { return fmt.Sprint("s", i%3) }, func(int) string { return "x" })
	must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "jobs", "--idle-timeout", "2s"), 0)
	if c := q.Counts(); c.DeadLetter != 0 || c.Active != 30 {
		t.Fatalf("%+v", c)
	}
}

func TestExitCodes(t *testing.T) {
	srv := sbtest.NewTestServer(t, &sbtest.ServerOptions{Queues: map[string]*sbtest.EntityOptions{"q": nil, "dst": nil}})
	ns := srv.Namespace()
	q, _ := ns.Entity("q")
	dst, _ := ns.Entity("dst")
	deadLetter(t, ns, "q", q, 20, nil, func(int) string { return "x" })

	r := must(t, sbctl(t, srv, "", "dlq", "redrive", "-h"), 0)
	if !strings.Contains(r.stderr, "Examples:") || !strings.Contains(r.stderr, "Exit codes:") {
		t.Fatalf("-h:\n%s", r.stderr)
	}
	must(t, sbctl(t, srv, "", "dlq", "redrive"), 2)
	must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "q", "--rate", "-1"), 2)
	must(t, sbctl(t, srv, "", "nonsense"), 2)
	must(t, sbctl(t, srv, "", "dlq", "summary", "--queue", "missing"), 1)

	// Sends to dst fail for good: --stop-on-failure stops (4); without it the run ends
	// with the failures reported (3). Nothing leaves the dead-letter queue either way.
	dst.InjectFault(sbtest.Fault{Err: &azservicebus.Error{Code: azservicebus.CodeUnauthorizedAccess}})
	must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "q", "--to", "dst", "--stop-on-failure", "--idle-timeout", "2s"), 4)
	r = must(t, sbctl(t, srv, "", "dlq", "redrive", "--queue", "q", "--to", "dst", "--idle-timeout", "2s", "--json"), 3)
	if !strings.Contains(r.stdout, `"failed":20`) {
		t.Fatalf("%s", r.stdout)
	}
	if q.Counts().DeadLetter != 20 || dst.Counts().Active != 0 {
		t.Fatalf("q %+v dst %+v", q.Counts(), dst.Counts())
	}
	dst.ClearFaults()

	// SIGINT mid-run: it stops taking messages, finishes what is in flight, reports, 130.
	ns.SetLatency(sbtest.Latency{RoundTrip: 20 * time.Millisecond})
	cmd := exec.Command(sbctlBin, "dlq", "redrive", "--queue", "q", "--to", "dst", "--rate", "10", "--json")
	cmd.Env = append(os.Environ(), "SERVICEBUS_CONNECTION_STRING="+srv.ConnectionString())
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for dst.Counts().Active < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit %v, want 130; %s", err, out.String())
	}
	var rep struct{ Moved int64 }
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	if int64(dst.Counts().Active) != rep.Moved || int64(q.Counts().DeadLetter) != 20-rep.Moved || rep.Moved == 0 || rep.Moved == 20 {
		t.Fatalf("moved %d; dst %+v; q %+v", rep.Moved, dst.Counts(), q.Counts())
	}
}
