package wire

import (
	"testing"
	"time"
)

// Every limit of Options (sbtest.ServerOptions) reads one way: zero is its default, negative no limit
// (AMQP's numbering for sessions and links, no timeout), positive itself.
func TestServerLimitsZeroNegativePositive(t *testing.T) {
	for _, tt := range []struct {
		name string
		o    Options
		want serverLimits
	}{
		{"zero", Options{}, serverLimits{
			conns: DefaultMaxConnections, sessions: DefaultMaxSessions, links: DefaultMaxLinks,
			writeTimeout: DefaultWriteTimeout, handshakes: DefaultMaxHandshakes,
			handshakeTimeout: DefaultHandshakeTimeout, adminIdle: DefaultAdminIdleTimeout,
		}},
		{"negative", Options{MaxConnections: -1, MaxSessionsPerConnection: -1, MaxLinksPerSession: -1,
			WriteTimeout: -1, MaxHandshakes: -1, HandshakeTimeout: -1, AdminIdleTimeout: -1}, serverLimits{
			conns: 1 << 62, sessions: 1 << 16, links: 1 << 16,
			writeTimeout: noTimeout, handshakes: 1 << 62, handshakeTimeout: noTimeout, adminIdle: noTimeout,
		}},
		{"positive", Options{MaxConnections: 2, MaxSessionsPerConnection: 3, MaxLinksPerSession: 1 << 20,
			WriteTimeout: time.Second, MaxHandshakes: 4, HandshakeTimeout: 2 * time.Second, AdminIdleTimeout: 3 * time.Second}, serverLimits{
			conns: 2, sessions: 3, links: 1 << 16,
			writeTimeout: time.Second, handshakes: 4, handshakeTimeout: 2 * time.Second, adminIdle: 3 * time.Second,
		}},
	} {
		if got := resolveLimits(&tt.o); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
