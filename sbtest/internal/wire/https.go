package wire

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	adminapi "github.com/sbkit/sbkit/sbtest/internal/admin"
	"github.com/sbkit/sbkit/sbtest/internal/explorer"
)

// TLS shares the AMQP port: the SDKs speak AMQP over TLS (without the emulator flag) and
// the admin client HTTPS to the host and port of the connection string's Endpoint (its
// entity manager builds https://<namespace>/), and a TLS connection starts with a
// handshake record (first byte 0x16) where a plain AMQP connection starts with "AMQP"
// (serveTLS tells AMQP from HTTP inside). So one connection string serves every client,
// and the same limits (ServerOptions) apply to all.
const tlsHandshakeRecord = 0x16

// adminServer serves the administration API (adminapi.Handler, over the Server's
// Namespace) over TLS for a Server, and in plain HTTP on a second listener when
// ServerOptions.AdminHTTPAddr names one (endpoint.go).
type adminServer struct {
	srv   *Server
	api   *adminapi.Handler
	pool  *x509.CertPool
	cert  []byte // the certificate, DER
	tls   *tls.Config
	http  *http.Server
	ln    *connListener
	plain net.Listener // the plain-HTTP listener, or nil
}

// newAdminServer starts the administration API of s over model; plain, when not nil,
// is the plain-HTTP listener it serves too (and closes on close), with the explorer over
// exModel when it is not nil.
func newAdminServer(s *Server, plain net.Listener, model adminapi.Model, exModel explorer.Model) (*adminServer, error) {
	addrs := []net.Addr{s.ln.Addr()}
	if plain != nil {
		addrs = append(addrs, plain.Addr())
	}
	cert, pool, err := selfSignedCert(s.host, addrs...)
	if err != nil {
		return nil, fmt.Errorf("sbtest: server: admin certificate: %w", err)
	}
	a := &adminServer{
		srv:   s,
		api:   adminapi.New(model),
		pool:  pool,
		cert:  cert.Certificate[0],
		tls:   &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ln:    newConnListener(s.ln.Addr()),
		plain: plain,
	}
	// A request's header must come within the handshake timeout, the whole request and
	// its answer within the write timeout; an idle keep-alive connection is closed after
	// AdminIdleTimeout (net/http keeps it forever without IdleTimeout and ReadTimeout).
	handler := s.httpRoutes(a.api)
	if exModel != nil {
		ex := explorer.New(exModel)
		handler = withExplorer(handler, ex, s.authorizeHTTP(ex))
	}
	a.http = &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: s.limits.handshakeTimeout,
		ReadTimeout:       s.limits.writeTimeout,
		WriteTimeout:      s.limits.writeTimeout,
		IdleTimeout:       s.limits.adminIdle,
		MaxHeaderBytes:    maxAdminHeader,
		ConnState:         a.connState,
		ConnContext:       connContext,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = a.http.Serve(a.ln)
	}()
	if plain != nil {
		s.wg.Add(1)
		go s.acceptLoop(plain, a.handlePlain)
	}
	return a, nil
}

// maxAdminHeader bounds a request's header; the SDK sends about 1 KiB.
const maxAdminHeader = 64 << 10

// peekFirst reads the first byte of a new connection by deadline and returns the
// connection, byte included, and whether it starts a TLS handshake (AMQP or the
// administration API inside) rather than plain AMQP. It returns nil when the connection
// closes or sends nothing by deadline.
func peekFirst(nc net.Conn, deadline time.Time) (net.Conn, bool) {
	_ = nc.SetReadDeadline(deadline)
	br := bufio.NewReaderSize(nc, 1)
	first, err := br.Peek(1)
	if err != nil {
		return nil, false
	}
	_ = nc.SetReadDeadline(time.Time{})
	return &peekedConn{Conn: nc, r: br}, first[0] == tlsHandshakeRecord
}

// admit hands an administration connection c whose TLS handshake, if any, is done
// (serveTLS), to the HTTP server, which closes it when it is done, unless MaxConnections
// are served already: then it closes c. Until its first request's header is complete,
// by deadline, c stays in its handshake (readRequestHead).
func (a *adminServer) admit(c net.Conn, deadline time.Time, hs *handshake) {
	s := a.srv
	c, err := readRequestHead(c, deadline)
	if err != nil {
		s.log.Debug("HTTP connection closed before its first request header", "err", err)
		_ = c.Close()
		return
	}
	s.mu.Lock()
	if s.closed || !s.admitLocked() {
		s.mu.Unlock()
		s.log.Info("administration connection refused", "limit", s.limits.conns)
		_ = c.Close()
		return
	}
	s.adminConns[c] = struct{}{}
	s.endHandshakeLocked(hs)
	s.mu.Unlock()
	if !a.ln.deliver(c) {
		a.forgetConn(c)
		_ = c.Close()
	}
}

// connState forgets an administration connection the HTTP server is done with.
func (a *adminServer) connState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		a.forgetConn(c)
	}
}

func (a *adminServer) forgetConn(c net.Conn) {
	s := a.srv
	s.mu.Lock()
	delete(s.adminConns, c)
	s.mu.Unlock()
}

// close stops the HTTP server and closes its connections and its plain-HTTP listener;
// Serve and the accept loop return soon after (the Server's wait group waits for them).
func (a *adminServer) close() {
	_ = a.http.Close()
	if a.plain != nil {
		_ = a.plain.Close()
	}
}

// peekedConn is a connection whose first bytes were read ahead into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// connListener is a net.Listener fed by adminServer.admit.
type connListener struct {
	addr   net.Addr
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *connListener) deliver(c net.Conn) bool {
	select {
	case l.conns <- c:
		return true
	case <-l.closed:
		return false
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }

// selfSignedCert makes an ECDSA P-256 certificate for localhost, the loopback
// addresses, host (the advertised host name or IP) and the listeners' IPs, valid from
// 1970 to 9999 so that it also works inside a testing/synctest bubble (whose clock
// starts in 2000), and a pool that trusts it.
func selfSignedCert(host string, addrs ...net.Addr) (tls.Certificate, *x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	names := []string{"localhost"}
	for _, addr := range addrs {
		if ta, ok := addr.(*net.TCPAddr); ok && ta.IP != nil && !ta.IP.IsUnspecified() {
			ips = append(ips, ta.IP)
		}
	}
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	} else if host != "" && !strings.EqualFold(host, "localhost") {
		names = append(names, host)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "sbtest"},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              names,
		IPAddresses:           ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool, nil
}

// AdminClientOptions is sbtest.Server.AdminClientOptions, which documents it.
func (s *Server) AdminClientOptions() *admin.ClientOptions {
	return &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: s.AdminHTTPClient()}}
}

// CertificatePEM is sbtest.Server.CertificatePEM, which documents it.
func (s *Server) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.admin.cert})
}

// AdminHTTPClient is sbtest.Server.AdminHTTPClient, which documents it.
func (s *Server) AdminHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: s.admin.pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: false,
	}}
}

// withExplorer serves the explorer's paths (explorer.Serves) of the requests on
// plain-HTTP connections (not isTLSRequest): the page and its files with ex, which hold no data, and its
// JSON API with exAPI (ex behind the administration API's authorization, when
// ServerOptions.SASKeys asks for one); everything else with api.
func withExplorer(api http.Handler, ex *explorer.Handler, exAPI http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case isTLSRequest(r) || !explorer.Serves(r):
			api.ServeHTTP(w, r)
		case explorer.IsPage(r):
			ex.ServeHTTP(w, r)
		default:
			exAPI.ServeHTTP(w, r)
		}
	})
}
