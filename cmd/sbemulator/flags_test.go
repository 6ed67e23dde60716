package main

import (
	"io"
	"testing"

	"github.com/sbkit/sbkit/sbtest"
)

// -cert writes the certificate of AMQP over TLS and of the admin API; -admin-cert, its
// former name, still works.
func TestCertFlagNames(t *testing.T) {
	for _, name := range []string{"-cert", "-admin-cert"} {
		cfg, err := parseFlags([]string{name, "/tmp/x.pem"}, noEnv, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.cert != "/tmp/x.pem" {
			t.Errorf("%s /tmp/x.pem sets the certificate file %q", name, cfg.cert)
		}
	}
}

// -fault takes every operation sbtest can fail, sessions' included.
func TestParseFaultOps(t *testing.T) {
	for spec, op := range map[string]sbtest.Op{
		"q:send": sbtest.OpSend, "q:renew:2:lock-lost": sbtest.OpRenew, "s:accept-session": sbtest.OpAcceptSession,
		"s:renew-session-lock:0:lock-lost": sbtest.OpRenewSessionLock, "s:session-state:1": sbtest.OpSessionState,
	} {
		f, err := parseFault(spec)
		if err != nil {
			t.Errorf("%q: %v", spec, err)
			continue
		}
		if f.fault.Op != op {
			t.Errorf("%q: op %v, want %v", spec, f.fault.Op, op)
		}
	}
	if _, err := parseFault("q:renew-lock"); err == nil {
		t.Error(`"q:renew-lock" parsed; want an unknown-op error`)
	}
}
