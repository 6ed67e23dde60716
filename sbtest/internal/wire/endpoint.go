package wire

import (
	"fmt"
	"github.com/sbkit/sbkit/sbtest/internal/modelerr"
	"net"
	"strings"
)

// How clients reach a Server: the host it advertises in ConnectionString and its
// certificate (ServerOptions.AdvertisedHost), and the optional plain-HTTP listener of
// the administration API (ServerOptions.AdminHTTPAddr). Microsoft's Service Bus emulator
// serves its administration API and GET /health in plain HTTP on port 5300 (its
// installer's HealthCheckApiSchema.md and docker-compose templates), and the SDKs'
// administration clients are pointed at http://HOST:5300/ for it.

// checkAdvertisedHost refuses an AdvertisedHost that is not a bare host name or IP
// address: a port, a scheme or a path would make ConnectionString unusable.
func checkAdvertisedHost(h string) error {
	if h == "" || net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")) != nil {
		return nil
	}
	bad := len(h) > 253
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%w: AdvertisedHost %q is not a host name or IP address (no port, scheme or path)", modelerr.ErrInvalidOptions, h)
	}
	return nil
}

// advertisedHost is the host clients are told to use: h when set (an IPv6 address
// without brackets), else the listener's IP, or 127.0.0.1 for a listener on every
// interface.
func advertisedHost(h string, addr net.Addr) string {
	if h != "" {
		return strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	}
	ta, ok := addr.(*net.TCPAddr)
	if !ok || ta.IP == nil || ta.IP.IsUnspecified() {
		return "127.0.0.1"
	}
	return ta.IP.String()
}

// endpoint is the advertised host with addr's port, as a client dials it.
func (s *Server) endpoint(addr net.Addr) string {
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	return net.JoinHostPort(s.host, port)
}

// listenAdminHTTP listens on addr for the plain-HTTP administration API; "" means none
// (nil, nil).
func listenAdminHTTP(addr string) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sbtest: server: AdminHTTPAddr: %w", err)
	}
	return ln, nil
}

// AdminHTTPURL is sbtest.Server.AdminHTTPURL, which documents it.
func (s *Server) AdminHTTPURL() string {
	if s.admin.plain == nil {
		return ""
	}
	return "http://" + s.endpoint(s.admin.plain.Addr())
}

// handlePlain serves a connection of the plain-HTTP listener: a TLS handshake is served as
// on the AMQP port, anything else as HTTP, which counts against MaxConnections once its
// first request header is complete (adminServer.admit).
func (a *adminServer) handlePlain(nc net.Conn, hs *handshake) {
	a.srv.serveByFirstByte(nc, hs, a.admit)
}
