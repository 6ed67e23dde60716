package sbtest

import (
	"bufio"
	"context"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// serverLimits are the resolved resource limits of a Server (ServerOptions).
type serverLimits struct {
	conns        int
	sessions     int
	links        int
	writeTimeout time.Duration
}

// resolveLimits applies the defaults of ServerOptions' limits: zero means the default,
// negative the protocol's maximum (no limit for connections).
func resolveLimits(o *ServerOptions) serverLimits {
	pick := func(v, def, unlimited int) int {
		switch {
		case v == 0:
			return def
		case v < 0 || v > unlimited:
			return unlimited
		}
		return v
	}
	l := serverLimits{
		conns:        pick(o.MaxConnections, DefaultServerMaxConnections, 1<<62),
		sessions:     pick(o.MaxSessionsPerConnection, DefaultServerMaxSessions, 1<<16),
		links:        pick(o.MaxLinksPerSession, DefaultServerMaxLinks, 1<<16),
		writeTimeout: o.WriteTimeout,
	}
	if l.writeTimeout <= 0 {
		l.writeTimeout = DefaultServerWriteTimeout
	}
	return l
}

// channelMax and handleMax are the channel-max and handle-max the server announces
// (and enforces): the numbering room for the sessions and links it allows, and at least
// the historical 4096 channels and 1024 handles so that clients numbering sparsely keep
// working. The limits themselves are counts (MaxSessionsPerConnection,
// MaxLinksPerSession), refused one by one with an AMQP error: go-amqp (the SDK) closes
// its whole connection when it runs out of channel numbers.
func (l serverLimits) channelMax() uint16 { return uint16(max(l.sessions, 4096) - 1) }
func (l serverLimits) handleMax() uint32  { return uint32(max(l.links, 1024) - 1) }

// maxRefusing bounds the connections being refused at once; more are closed without an
// AMQP answer.
const maxRefusing = 8

// refusalTimeout bounds the handshake of a refused connection.
const refusalTimeout = 5 * time.Second

// refuseLocked refuses a connection beyond MaxConnections the way the service rejects
// connections beyond its quota ("subsequent requests for additional connections are
// rejected", Service Bus quotas): the open exchange completes, then a close with
// amqp:resource-limit-exceeded, which the SDK reports without retrying. Called with
// s.mu held.
func (s *Server) refuseLocked(c *srvConn) {
	if s.refusing >= maxRefusing {
		_ = c.nc.Close()
		return
	}
	s.refusing++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			s.refusing--
			s.mu.Unlock()
		}()
		defer c.abort()
		stop := context.AfterFunc(c.ctx, func() { _ = c.nc.Close() })
		defer stop()
		c.log.Info("connection refused", "limit", s.limits.conns)
		if err := c.handshake(bufio.NewReaderSize(c.nc, 4096), refusalTimeout); err != nil {
			return
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(refusalTimeout))
		b, err := amqp.AppendFrame(nil, amqp.Frame{Type: amqp.FrameTypeAMQP, Body: &amqp.Close{Error: protoError(condResourceLimit,
			"sbtest: server: %d connections already open (ServerOptions.MaxConnections)", s.limits.conns)}})
		if err == nil {
			_, _ = c.nc.Write(b)
		}
	}()
}
