package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest"
)

// testTimeout bounds each wait of these tests: generous for a loaded 2-core machine.
const testTimeout = 20 * time.Second

// noEnv is an empty environment, so that the machine's variables do not change a test.
func noEnv(string) (string, bool) { return "", false }

// envOf is an environment of the given variables only.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// TestMain runs the command itself when the test binary is started by
// TestSignalStopsCleanly, so that the real signal handling is tested.
func TestMain(m *testing.M) {
	if os.Getenv("SBEMULATOR_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestRunServesAndStops starts the command in process with entities from flags and a
// config file and a fault from a flag, talks to it with the Go SDK, and stops it.
func TestRunServesAndStops(t *testing.T) {
	base := runtime.NumGoroutine()
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "Config.json")
	certFile := filepath.Join(dir, "admin.pem")
	if err := os.WriteFile(cfgFile, []byte(sampleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// run writes the connection string and its start line before it sends on ready, and
	// its stop line before it returns: the buffers are read after those.
	var stdout, stderr bytes.Buffer
	ready := make(chan *sbtest.Server, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-config", cfgFile, "-queue", "q1,q2",
			"-subscription", "news/web", "-lock-duration", "10s", "-fault", "q1:send:1:unauthorized",
			"-latency", "1ms", "-store-time", "2ms", "-store-concurrency", "3", "-max-connections", "1",
			"-admin-cert", certFile, "-stats"}, noEnv, &stdout, &stderr, ready)
	}()
	var srv *sbtest.Server
	select {
	case srv = <-ready:
	case err := <-done:
		t.Fatalf("run returned %v before serving; stderr:\n%s", err, stderr.String())
	case <-time.After(testTimeout):
		t.Fatal("the server did not start")
	}
	if got := strings.TrimSpace(stdout.String()); got != srv.ConnectionString() {
		t.Fatalf("stdout %q, want the connection string %q", got, srv.ConnectionString())
	}
	for _, p := range []string{"q1", "q2", "orders", "news/Subscriptions/web", "events/Subscriptions/created"} {
		if _, ok := srv.Namespace().Entity(p); !ok {
			t.Errorf("entity %q missing", p)
		}
	}
	if q, _ := srv.Namespace().Entity("q1"); q.Options().LockDuration != 10*time.Second {
		t.Errorf("q1 LockDuration %v, want 10s from -lock-duration", q.Options().LockDuration)
	}

	if l := srv.Namespace().Latency(); l != (sbtest.Latency{RoundTrip: time.Millisecond, StoreTime: 2 * time.Millisecond, StoreConcurrency: 3}) {
		t.Errorf("latency %+v, want the flags' 1ms, 2ms, 3", l)
	}

	// -admin-cert: a client that trusts the written certificate reaches the admin API.
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("-admin-cert wrote no PEM certificate: %q", pemBytes)
	}
	conn, err := tls.Dial("tcp", srv.Addr().String(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS to the admin API with the written certificate: %v", err)
	}
	_ = conn.Close()

	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	opCtx, opCancel := context.WithTimeout(ctx, testTimeout)
	defer opCancel()
	s, err := client.NewSender("q1", nil)
	if err != nil {
		t.Fatal(err)
	}
	var sbErr *azservicebus.Error
	if err := s.SendMessage(opCtx, &azservicebus.Message{Body: []byte("x")}, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeUnauthorizedAccess {
		t.Fatalf("first send = %v, want the injected CodeUnauthorizedAccess", err)
	}
	if err := s.SendMessage(opCtx, &azservicebus.Message{Body: []byte("hello")}, nil); err != nil {
		t.Fatalf("second send: %v", err)
	}
	r, err := client.NewReceiverForQueue("q1", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.ReceiveMessages(opCtx, 1, nil)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "hello" {
		t.Fatalf("receive = %v, %v; want hello", msgs, err)
	}
	if err := r.CompleteMessage(opCtx, msgs[0], nil); err != nil {
		t.Fatal(err)
	}
	// -max-connections 1: a second client is refused while the first is connected.
	client2, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s2, err := client2.NewSender("q2", nil); err != nil {
		t.Fatal(err)
	} else if err := s2.SendMessage(opCtx, &azservicebus.Message{Body: []byte("x")}, nil); err == nil {
		t.Error("a second connection was served with -max-connections 1")
	}
	_ = client2.Close(opCtx)
	_ = client.Close(opCtx)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run returned %v after the context ended", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("run did not return after the context ended")
	}
	if !strings.Contains(stderr.String(), "sbemulator: stopped") {
		t.Errorf("stderr %q does not say it stopped", stderr.String())
	}
	// -stats: each queue's and subscription's counters when it stops (the refused first
	// send stored nothing).
	if want := "sbemulator: q1: sent 1, received 1, completed 1, abandoned 0, dead-lettered 0, deferred 0, released 0, locks expired 0, expired 0\n"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not give q1's counters %q", stderr.String(), want)
	}
	if !strings.Contains(stderr.String(), "sbemulator: news/Subscriptions/web: sent 0,") {
		t.Errorf("stderr %q does not give the subscription's counters", stderr.String())
	}
	if ws := "wss://" + endpointOf(srv.ConnectionString()) + "/$servicebus/websocket"; !strings.Contains(stderr.String(), ws) {
		t.Errorf("stderr %q does not name the WebSocket endpoint %s", stderr.String(), ws)
	}
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left after run returned, want at most %d", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSignalStopsCleanly runs the command as a process (this test binary, see TestMain),
// reads the connection string from its first line of output, and stops it with SIGTERM
// and SIGINT: it must exit 0.
func TestSignalStopsCleanly(t *testing.T) {
	t.Parallel()
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-queue", "q")
			cmd.Env = append(os.Environ(), "SBEMULATOR_TEST_MAIN=1")
			var stderr bytes.Buffer // read only after Wait
			cmd.Stderr = &stderr
			kill := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line := make(chan string, 1)
			go func() {
				l, _ := bufio.NewReader(out).ReadString('\n')
				line <- l
				_, _ = io.Copy(io.Discard, out)
			}()
			select {
			case l := <-line:
				if !strings.HasPrefix(l, "Endpoint=sb://127.0.0.1:") || !strings.Contains(l, "UseDevelopmentEmulator=true") {
					kill()
					t.Fatalf("first line %q is not the connection string; stderr:\n%s", l, stderr.String())
				}
			case <-time.After(testTimeout):
				kill()
				t.Fatalf("no connection string printed; stderr:\n%s", stderr.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit after %v: %v; stderr:\n%s", sig, err, stderr.String())
				}
			case <-time.After(testTimeout):
				_ = cmd.Process.Kill()
				<-exited
				t.Fatalf("still running %v after %v; stderr:\n%s", testTimeout, sig, stderr.String())
			}
		})
	}
}

func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-subscription", "nosub"}, "want topic/name"},
		{[]string{"-queue", "a,,b"}, "empty name"},
		{[]string{"-queue", "a", "-topic", "a"}, "as a queue and as a topic"},
		{[]string{"-fault", "q"}, "entity:op"},
		{[]string{"-fault", "q:explode"}, `unknown op "explode"`},
		{[]string{"-fault", "q:send:x"}, "not a number"},
		{[]string{"-fault", "q:send:1:boom"}, `unknown error "boom"`},
		{[]string{"-config", "/nonexistent/Config.json"}, "no such file"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nosuchflag"}, "not defined"},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags(tt.args, noEnv, &stderr)
		msg := ""
		if err != nil {
			msg = err.Error() + stderr.String()
		}
		if err == nil || !strings.Contains(msg, tt.want) {
			t.Errorf("parseFlags(%q) = %v (%s), want an error mentioning %q", tt.args, err, stderr.String(), tt.want)
		}
	}
}

// TestRunRefusesBadSetup: errors found while creating entities or injecting faults stop
// the command before it listens.
func TestRunRefusesBadSetup(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-queue", "q", "-fault", "missing:send"}, `no entity "missing"`},
		{[]string{"-topic", "t", "-fault", "t:receive"}, "only takes send faults"},
		{[]string{"-queue", "q", "-lock-duration", "10m"}, "LockDuration"},
		{[]string{"-addr", "256.0.0.1:1", "-queue", "q"}, "sbtest: server"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"-addr", "127.0.0.1:0"}, tt.args...), noEnv, &stdout, &stderr, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q) = %v, want an error mentioning %q", tt.args, err, tt.want)
		}
		if stdout.Len() != 0 {
			t.Errorf("run(%q) printed %q, want nothing on a failed start", tt.args, stdout.String())
		}
	}
}
