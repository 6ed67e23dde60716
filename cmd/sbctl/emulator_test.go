package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// emulator is a running cmd/sbemulator binary.
type emulator struct {
	conn   string // its connection string (UseDevelopmentEmulator=true)
	cert   string // its certificate (PEM), for the administration API over TLS
	stderr *bytes.Buffer
}

// startEmulator builds cmd/sbemulator from this repository (the core module) and starts
// it on a free port of 127.0.0.1 with the given queues; it stops it with SIGTERM when the
// test ends and requires exit status 0.
func startEmulator(t *testing.T, queues ...string) *emulator {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "sbemulator")
	if out, err := exec.Command("go", "-C", "../..", "build", "-o", bin, "./cmd/sbemulator").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/sbemulator: %v\n%s", err, out)
	}
	e := &emulator{cert: filepath.Join(dir, "ca.pem"), stderr: &bytes.Buffer{}}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-http-addr", "off", "-cert", e.cert, "-queue", strings.Join(queues, ","))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = e.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	first := make(chan string, 1)
	go func() {
		// The first line is the connection string; the rest is drained.
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		first <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	select {
	case e.conn = <-first:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("sbemulator printed no line in a minute")
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("sbemulator after SIGTERM: %v\n%s", err, e.stderr)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("sbemulator did not stop after SIGTERM\n%s", e.stderr)
		}
	})
	if !strings.Contains(e.conn, "UseDevelopmentEmulator=true") {
		t.Fatalf("sbemulator's first line %q is not a connection string", e.conn)
	}
	return e
}

// run runs the sbctl binary with args against the emulator.
func (e *emulator) run(t *testing.T, args ...string) result {
	t.Helper()
	return runSbctl(t, []string{"SERVICEBUS_CONNECTION_STRING=" + e.conn, "SBCTL_ADMIN_CA=" + e.cert}, "", args...)
}

// stats runs sbctl stats --json and returns the counts by entity name.
func (e *emulator) stats(t *testing.T) map[string]entityStats {
	t.Helper()
	r := must(t, e.run(t, "stats", "--json"), 0)
	out := map[string]entityStats{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var s entityStats
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("stats --json line %q: %v", sc.Text(), err)
		}
		out[s.Name] = s
	}
	return out
}

// TestEmulatorBinaryEndToEnd runs sbctl against the cmd/sbemulator binary, as a user
// with the emulator's connection string would: the dead letters are made with the SDK
// over AMQP, then sbctl summarizes them, re-drives those of one reason to another queue
// and reads the counts from the administration API.
func TestEmulatorBinaryEndToEnd(t *testing.T) {
	e := startEmulator(t, "orders", "replay")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	client, err := azservicebus.NewClientFromConnectionString(e.conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctx)
	snd, err := client.NewSender("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	for i := range n {
		m := &azservicebus.Message{Body: []byte(fmt.Sprint("order ", i)), MessageID: new(fmt.Sprintf("o%02d", i))}
		if err := snd.SendMessage(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
	}
	rcv, err := client.NewReceiverForQueue("orders", nil)
	if err != nil {
		t.Fatal(err)
	}
	for dead := 0; dead < n; {
		ms, err := rcv.ReceiveMessages(ctx, n-dead, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			var i int
			fmt.Sscanf(m.MessageID, "o%d", &i)
			reason := map[bool]string{true: "Poison", false: "Timeout"}[i%3 == 0]
			if err := rcv.DeadLetterMessage(ctx, m, &azservicebus.DeadLetterOptions{Reason: &reason}); err != nil {
				t.Fatal(err)
			}
			dead++
		}
	}
	_ = rcv.Close(ctx)

	if s := e.stats(t); s["orders"].DeadLetter != n || s["orders"].Active != 0 {
		t.Fatalf("stats before: %+v", s)
	}
	r := must(t, e.run(t, "dlq", "summary", "--queue", "orders", "--json"), 0)
	var sum struct {
		Summary struct {
			Count    int64
			ByReason map[string]int64
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || sum.Summary.Count != n || sum.Summary.ByReason["Poison"] != 10 || sum.Summary.ByReason["Timeout"] != 20 {
		t.Fatalf("summary --json %s: %v", r.stdout, err)
	}

	r = must(t, e.run(t, "dlq", "redrive", "--queue", "orders", "--reason", "Poison", "--to", "replay", "--idle-timeout", "2s", "--json"), 0)
	if !strings.Contains(r.stdout, `"moved":10`) || !strings.Contains(r.stdout, `"skipped":20`) {
		t.Fatalf("redrive --json: %s\nstderr: %s", r.stdout, r.stderr)
	}
	s := e.stats(t)
	if s["orders"].DeadLetter != 20 || s["orders"].Active != 0 || s["replay"].Active != 10 || s["replay"].DeadLetter != 0 {
		t.Fatalf("stats after the re-drive: orders %+v, replay %+v", s["orders"], s["replay"])
	}
	// The copies are the Poison ones, without the dead-letter reason.
	r = must(t, e.run(t, "peek", "--queue", "replay", "--max", "100", "--json"), 0)
	if got := strings.Count(r.stdout, "\n"); got != 10 || strings.Contains(r.stdout, "Timeout") || strings.Contains(r.stdout, `"DeadLetterReason"`) {
		t.Fatalf("peek replay (%d lines):\n%s", got, r.stdout)
	}
}
