package sbtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// What clients other than the Go SDK with its emulator flag need from the server: AMQP
// over TLS (the SDKs without emulator support).

// tlsConfig trusts srv's certificate.
func tlsConfig(t *testing.T, srv *Server) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CertificatePEM()) {
		t.Fatal("CertificatePEM is not a PEM certificate")
	}
	// go-amqp names the server by the Endpoint's host and port; the certificate names the IP.
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
}

// TestServerAMQPOverTLS: the SDK without the emulator flag speaks AMQP over TLS ("amqps",
// AMQP 1.0 part 5.2) to the host and port of the Endpoint, as every SDK release without
// emulator support does, while the admin client speaks HTTPS to the same port; both
// work with only the server's certificate trusted.
func TestServerAMQPOverTLS(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	conn := strings.Replace(w.srv.ConnectionString(), ";UseDevelopmentEmulator=true", "", 1)
	client, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		TLSConfig:    tlsConfig(t, w.srv),
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	s, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over tls")}, nil); err != nil {
		t.Fatalf("send over TLS: %v", err)
	}
	r, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if string(m.Body) != "over tls" {
		t.Fatalf("received %q", m.Body)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete over TLS: %v", err)
	}
	ac, err := admin.NewClientFromConnectionString(conn, w.srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ac.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil {
		t.Fatalf("admin client on the same port: %v", err)
	}
	if rt.TotalMessageCount != 0 {
		t.Fatalf("TotalMessageCount %d after the complete, want 0", rt.TotalMessageCount)
	}
	// The plain AMQP client (the emulator flag) still works beside them.
	w.healthyClient(t, "q")(t)
}

// TestServerTLSFirstBytes: inside TLS, the protocol header starts AMQP (SASL or not)
// and anything else is HTTP, answered by the administration API.
func TestServerTLSFirstBytes(t *testing.T) {
	t.Parallel()
	w := newWire(t, nil)
	for _, hdr := range []string{amqp.ProtoHeaderSASL, amqp.ProtoHeaderAMQP} {
		tc, err := tls.Dial("tcp", w.srv.Addr().String(), tlsConfig(t, w.srv))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.Write([]byte(hdr)); err != nil {
			t.Fatal(err)
		}
		h, err := amqp.ReadProtoHeader(bufio.NewReader(tc))
		_ = tc.Close()
		if err != nil || string(h[:]) != hdr {
			t.Fatalf("protocol header %q inside TLS answered with %q, %v; want the same header", hdr, h[:], err)
		}
	}
	tc, err := tls.Dial("tcp", w.srv.Addr().String(), tlsConfig(t, w.srv))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := tc.Write([]byte("GET /$namespaceinfo HTTP/1.1\r\nHost: sbtest\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("HTTP request inside TLS answered %q, %v; want HTTP/1.1 200", line, err)
	}
}
