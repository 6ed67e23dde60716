package main

import (
	"bytes"
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

// -sas-key (and SBEMULATOR_SAS_KEY) name the keys the emulator requires; a value that is
// not name=key is refused.
func TestSASKeyFlag(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-sas-key", "a=k1,b=k2=="}, envOf(map[string]string{"SBEMULATOR_SAS_KEY": "c=k3"}), &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.sasKeys) != 2 || cfg.sasKeys["a"] != "k1" || cfg.sasKeys["b"] != "k2==" {
		t.Errorf("keys %v, want a=k1 and b=k2== (the command line's)", cfg.sasKeys)
	}
	if cfg, err = parseFlags(nil, envOf(map[string]string{"SBEMULATOR_SAS_KEY": "c=k3"}), &stderr); err != nil || cfg.sasKeys["c"] != "k3" {
		t.Errorf("SBEMULATOR_SAS_KEY=c=k3: %v, %v", cfg.sasKeys, err)
	}
	if _, err := parseFlags([]string{"-sas-key", "nokey"}, envOf(nil), &stderr); err == nil {
		t.Error("-sas-key nokey accepted")
	}
}
