package sbtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// unspecifiedListener reports the address of a listener on every interface, as
// net.Listen("tcp", ":5672") does, while listening on loopback.
type unspecifiedListener struct{ net.Listener }

func (l unspecifiedListener) Addr() net.Addr {
	return &net.TCPAddr{IP: net.IPv6unspecified, Port: l.Listener.Addr().(*net.TCPAddr).Port}
}

// A server on every interface advertises a loopback address: "[::]" is not an address a
// client can connect to.
func TestServerConnectionStringOnEveryInterface(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := newServer(nil, unspecifiedListener{ln})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	port := ln.Addr().(*net.TCPAddr).Port
	want := "Endpoint=sb://127.0.0.1:" + strconv.Itoa(port) + ";"
	if got := srv.ConnectionString(); !strings.HasPrefix(got, want) {
		t.Fatalf("ConnectionString() = %q, want it to start with %q", got, want)
	}
}

// GET /health answers as Microsoft's emulator documents (HealthCheckApiSchema.md of
// Azure/azure-service-bus-emulator-installer): 200 and {"status":"healthy"}.
func TestServerHealthOverTLS(t *testing.T) {
	t.Parallel()
	w := newWire(t, nil)
	resp, err := w.srv.AdminHTTPClient().Get("https://" + w.srv.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	checkHealthy(t, resp)
}

func checkHealthy(t *testing.T, resp *http.Response) {
	t.Helper()
	defer resp.Body.Close()
	var body struct{ Status, Message string }
	err := json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusOK || err != nil || body.Status != "healthy" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /health: %d %q %+v (%v), want 200 application/json {\"status\":\"healthy\"}",
			resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
	}
}

// httpOnly is the transport Microsoft's emulator samples give the Go SDK's admin
// client: the client builds https://HOST:PORT/ URLs, the emulator's port 5300 speaks
// plain HTTP.
type httpOnly struct{ base http.RoundTripper }

func (t httpOnly) Do(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme = "http"
	return t.base.RoundTrip(req)
}

// plainAdminClient is the SDK's admin client for srv's plain-HTTP port, built as
// Microsoft's emulator samples build it: the connection string names the HTTP port.
func plainAdminClient(t *testing.T, srv *Server) *admin.Client {
	t.Helper()
	u, err := url.Parse(srv.AdminHTTPURL())
	if err != nil || u.Host == "" {
		t.Fatalf("AdminHTTPURL() = %q (%v), want http://HOST:PORT", srv.AdminHTTPURL(), err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	ac, err := admin.NewClientFromConnectionString(
		"Endpoint=sb://"+u.Host+";SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=SAS_KEY_VALUE;UseDevelopmentEmulator=true;",
		&admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: httpOnly{tr}}})
	if err != nil {
		t.Fatal(err)
	}
	return ac
}

// The plain-HTTP administration port (ServerOptions.AdminHTTPAddr) serves GET /health
// and the SDK's admin client the way Microsoft's samples use port 5300; entities made
// there are the AMQP port's; a TLS client is served on it too; a queue named "health"
// stays reachable through the admin client.
func TestServerAdminHTTP(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0"})
	ctx := wireCtx(t)
	if !strings.HasPrefix(w.srv.AdminHTTPURL(), "http://127.0.0.1:") {
		t.Fatalf("AdminHTTPURL() = %q, want http://127.0.0.1:PORT", w.srv.AdminHTTPURL())
	}
	hc := &http.Client{Transport: &http.Transport{}}
	resp, err := hc.Get(w.srv.AdminHTTPURL() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	checkHealthy(t, resp)
	hc.CloseIdleConnections()

	ac := plainAdminClient(t, w.srv)
	for _, name := range []string{"made-over-http", "health"} {
		if _, err := ac.CreateQueue(ctx, name, &admin.CreateQueueOptions{
			Properties: &admin.QueueProperties{MaxDeliveryCount: to.Ptr(int32(4))}}); err != nil {
			t.Fatalf("CreateQueue %s over plain HTTP: %v", name, err)
		}
		got, err := ac.GetQueue(ctx, name, nil)
		if err != nil || got == nil || *got.MaxDeliveryCount != 4 {
			t.Fatalf("GetQueue %s over plain HTTP = %+v, %v; want MaxDeliveryCount 4", name, got, err)
		}
	}
	if err := w.sender(t, "made-over-http").SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
		t.Fatal(err)
	}
	if m := receiveN(t, w.receiver(t, "made-over-http", nil), 1)[0]; string(m.Body) != "m" {
		t.Fatalf("received %q", m.Body)
	}
	rt, err := ac.GetQueueRuntimeProperties(ctx, "made-over-http", nil)
	if err != nil || rt == nil || rt.TotalMessageCount != 1 {
		t.Fatalf("GetQueueRuntimeProperties = %+v, %v; want 1 message (locked)", rt, err)
	}
	if _, err := ac.DeleteQueue(ctx, "made-over-http", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.srv.Namespace().Entity("made-over-http"); ok {
		t.Fatal("queue deleted over plain HTTP still in the namespace")
	}

	// HTTPS on the same port, for admin clients built from its connection string.
	u, _ := url.Parse(w.srv.AdminHTTPURL())
	tlsAdmin, err := admin.NewClientFromConnectionString(
		"Endpoint=sb://"+u.Host+";SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", w.srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := tlsAdmin.GetQueue(ctx, "health", nil); err != nil || got == nil {
		t.Fatalf("GetQueue over TLS on the HTTP port = %+v, %v", got, err)
	}
}

// Plain-HTTP connections count against MaxConnections like the others, and the port
// closes with the server, leaving no goroutine behind.
func TestServerAdminHTTPLimitsAndClose(t *testing.T) {
	base := runtime.NumGoroutine()
	srv, err := NewServer(&ServerOptions{AdminHTTPAddr: "127.0.0.1:0", MaxConnections: 1})
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(srv.AdminHTTPURL(), "http://")
	get := func() (net.Conn, error) {
		nc, err := net.DialTimeout("tcp", addr, wireTimeout)
		if err != nil {
			return nil, err
		}
		_ = nc.SetDeadline(time.Now().Add(wireTimeout))
		if _, err := io.WriteString(nc, "GET /health HTTP/1.1\r\nHost: sbtest\r\n\r\n"); err != nil {
			return nc, err
		}
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		return nc, err
	}
	first, err := get() // kept open: a keep-alive connection is served
	if err != nil {
		t.Fatalf("first connection: %v", err)
	}
	if second, err := get(); err == nil {
		t.Fatal("a second HTTP connection was served with MaxConnections 1")
	} else if second != nil {
		_ = second.Close()
	}
	_ = first.Close()

	if err := srv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if nc, err := net.DialTimeout("tcp", addr, wireTimeout); err == nil {
		_ = nc.Close()
		t.Fatal("the plain-HTTP port accepts connections after Close")
	}
	noGoroutinesAbove(t, base)
}

// AdvertisedHost is the connection string's host and one of the certificate's names;
// anything with a port, scheme or path is refused.
func TestServerAdvertisedHost(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"sb-emulator.test", "10.1.2.3", "fd00::5"} {
		srv, err := NewServer(&ServerOptions{AdvertisedHost: host, AdminHTTPAddr: "127.0.0.1:0"})
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(srv.Addr().String())
		_, httpPort, _ := net.SplitHostPort(strings.TrimPrefix(srv.AdminHTTPURL(), "http://"))
		hp := net.JoinHostPort(host, port)
		if got := srv.ConnectionString(); !strings.HasPrefix(got, "Endpoint=sb://"+hp+";") {
			t.Errorf("ConnectionString() = %q, want Endpoint=sb://%s", got, hp)
		}
		if got, want := srv.AdminHTTPURL(), "http://"+net.JoinHostPort(host, httpPort); got != want {
			t.Errorf("AdminHTTPURL() = %q, want %q", got, want)
		}
		// The client dials the loopback listener and verifies the advertised name.
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(srv.CertificatePEM())
		conn, err := tls.Dial("tcp", srv.Addr().String(), &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
		if err != nil {
			t.Errorf("TLS as %q: %v", host, err)
		} else {
			_ = conn.Close()
		}
		_ = srv.Close(context.Background())
	}
	for _, bad := range []string{"host:5672", "sb://host", "host/path", "a b", "host;x=y"} {
		if srv, err := NewServer(&ServerOptions{AdvertisedHost: bad}); !errors.Is(err, ErrInvalidOptions) {
			if srv != nil {
				_ = srv.Close(context.Background())
			}
			t.Errorf("AdvertisedHost %q: %v, want ErrInvalidOptions", bad, err)
		}
	}
}
