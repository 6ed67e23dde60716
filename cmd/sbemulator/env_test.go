package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every flag can be set from SBEMULATOR_<FLAG>; the command line wins; the variables of
// Microsoft's compose templates that configure its SQL database and licence prompt are
// accepted and change nothing.
func TestEnvironment(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{
		"SBEMULATOR_ADDR":          "127.0.0.1:0",
		"SBEMULATOR_QUEUE":         "from-env1,from-env2",
		"SBEMULATOR_TOPIC":         "events",
		"SBEMULATOR_LOCK_DURATION": "30s",
		"SBEMULATOR_ADVERTISE":     "sb-emulator",
		"SBEMULATOR_HTTP_ADDR":     "127.0.0.1:0",
		"SBEMULATOR_V":             "true",
		"SBEMULATOR_VERSION":       "true", // -version has no variable
		"ACCEPT_EULA":              "Y",
		"SQL_SERVER":               "sqledge",
		"MSSQL_SA_PASSWORD":        "secret",
		"SQL_WAIT_INTERVAL":        "15",
	})
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-topic", "from-flag"}, env, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.addr != "127.0.0.1:0" || cfg.advertise != "sb-emulator" || cfg.httpAddr != "127.0.0.1:0" || !cfg.verbose || cfg.version {
		t.Errorf("config %+v, want the variables' addr, advertise, http-addr, -v, and no -version", cfg)
	}
	if q := cfg.entities.Queues["from-env1"]; q == nil || q.LockDuration != 30*time.Second || cfg.entities.Queues["from-env2"] == nil {
		t.Errorf("queues %v, want from-env1 and from-env2 with SBEMULATOR_LOCK_DURATION's 30s", cfg.entities.Queues)
	}
	if _, ok := cfg.entities.Topics["events"]; ok || cfg.entities.Topics["from-flag"].Options == nil {
		t.Errorf("topics %v, want the command line's from-flag only", cfg.entities.Topics)
	}

	for _, tt := range []struct{ name, value, want string }{
		{"SBEMULATOR_MAX_DELIVERY_COUNT", "three", `SBEMULATOR_MAX_DELIVERY_COUNT="three"`},
		{"SBEMULATOR_SUBSCRIPTION", "nosub", "want topic/name"},
		{"EMULATOR_HTTP_PORT", "http", `EMULATOR_HTTP_PORT="http" is not a port number`},
	} {
		_, err := parseFlags(nil, envOf(map[string]string{tt.name: tt.value}), &stderr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s=%s: %v, want an error mentioning %q", tt.name, tt.value, err, tt.want)
		}
	}
}

// A flag given on the command line under one name is not set from the variable of
// another name of it (-cert and its former name -admin-cert): the environment sets only
// what the command line did not. With neither given and both variables set, the first
// in alphabetical order wins (SBEMULATOR_ADMIN_CERT).
func TestEnvironmentAliases(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-cert", "a.pem"}, map[string]string{"SBEMULATOR_ADMIN_CERT": "b.pem"}, "a.pem"},
		{[]string{"-admin-cert", "a.pem"}, map[string]string{"SBEMULATOR_CERT": "b.pem"}, "a.pem"},
		{nil, map[string]string{"SBEMULATOR_CERT": "b.pem"}, "b.pem"},
		{nil, map[string]string{"SBEMULATOR_CERT": "b.pem", "SBEMULATOR_ADMIN_CERT": "c.pem"}, "c.pem"},
	} {
		cfg, err := parseFlags(tt.args, envOf(tt.env), &stderr)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.cert != tt.want {
			t.Errorf("%q with %v: -cert %q, want %q", tt.args, tt.env, cfg.cert, tt.want)
		}
	}
}

// -http-addr defaults to -addr's host with Microsoft's port 5300 (EMULATOR_HTTP_PORT
// changes it), or a free port when -addr's is 0.
func TestHTTPAddr(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ httpAddr, addr, port, want string }{
		{"", "127.0.0.1:5672", "", "127.0.0.1:5300"},
		{"", ":5672", "", ":5300"},
		{"", "[::1]:5672", "", "[::1]:5300"},
		{"", "127.0.0.1:5672", "5400", "127.0.0.1:5400"},
		{"", "127.0.0.1:0", "5400", "127.0.0.1:0"},
		{"off", "127.0.0.1:5672", "5400", ""},
		{"OFF", "127.0.0.1:5672", "", ""},
		{"0.0.0.0:8080", "127.0.0.1:5672", "5400", "0.0.0.0:8080"},
	} {
		env := noEnv
		if tt.port != "" {
			env = envOf(map[string]string{"EMULATOR_HTTP_PORT": tt.port})
		}
		got, err := resolveHTTPAddr(tt.httpAddr, tt.addr, env)
		if err != nil || got != tt.want {
			t.Errorf("resolveHTTPAddr(%q, %q, EMULATOR_HTTP_PORT=%q) = %q, %v; want %q", tt.httpAddr, tt.addr, tt.port, got, err, tt.want)
		}
	}
}

// Microsoft's compose templates mount Config.json at /ServiceBus_Emulator/ConfigFiles:
// that file is read when it exists and no -config is given. Not parallel: it sets
// defaultConfigPath.
func TestDefaultConfigPath(t *testing.T) {
	dir := t.TempDir()
	saved := defaultConfigPath
	t.Cleanup(func() { defaultConfigPath = saved })

	defaultConfigPath = filepath.Join(dir, "missing.json")
	cfg, err := parseFlags([]string{"-queue", "q"}, noEnv, &bytes.Buffer{})
	if err != nil || len(cfg.configFiles) != 0 {
		t.Fatalf("without the default file: %v, %v; want no configuration file", cfg.configFiles, err)
	}

	defaultConfigPath = microsoftConfig
	cfg, err = parseFlags(nil, noEnv, &bytes.Buffer{})
	if err != nil || !slices.Equal(cfg.configFiles, []string{microsoftConfig}) || cfg.entities.Queues["queue.1"] == nil {
		t.Fatalf("with the default file: %v, %v; want it read (queue.1)", cfg.configFiles, err)
	}
	other := filepath.Join(dir, "Other.json")
	if err := os.WriteFile(other, []byte(`{"UserConfig":{"Namespaces":[{"Name":"n","Queues":[{"Name":"other"}]}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = parseFlags([]string{"-config", other}, noEnv, &bytes.Buffer{})
	if err != nil || cfg.entities.Queues["queue.1"] != nil || cfg.entities.Queues["other"] == nil {
		t.Fatalf("with -config: %v, %v; want only that file read", cfg.configFiles, err)
	}
}

// The command serves GET /health and the administration API over plain HTTP on its
// second port, says where on stderr, and advertises -advertise's host in the
// connection string and the certificate -admin-cert writes.
func TestRunHealthAndAdvertise(t *testing.T) {
	t.Parallel()
	certFile := filepath.Join(t.TempDir(), "admin.pem")
	srv := startRun(t, "-addr", "127.0.0.1:0", "-advertise", "sb-emulator.test", "-admin-cert", certFile, "-queue", "q")
	if cs := srv.ConnectionString(); !strings.HasPrefix(cs, "Endpoint=sb://sb-emulator.test:") {
		t.Errorf("connection string %q, want the advertised host", cs)
	}
	u := srv.AdminHTTPURL()
	if !strings.HasPrefix(u, "http://sb-emulator.test:") {
		t.Fatalf("AdminHTTPURL() = %q, want the advertised host", u)
	}
	local := "http://127.0.0.1:" + u[strings.LastIndexByte(u, ':')+1:]
	client := &http.Client{Transport: &http.Transport{}, Timeout: testTimeout}
	defer client.CloseIdleConnections()
	resp, err := client.Get(local + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Status string }
	err = json.NewDecoder(resp.Body).Decode(&body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err != nil || body.Status != "healthy" {
		t.Fatalf("GET /health: %d %+v %v, want 200 healthy", resp.StatusCode, body, err)
	}
	resp, err = client.Get(local + "/q?api-version=2021-05")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "atom+xml") {
		t.Fatalf("GET /q over plain HTTP: %d %s, want 200 and the queue's ATOM entry", resp.StatusCode, resp.Header.Get("Content-Type"))
	}

	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	conn, err := tls.Dial("tcp", srv.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "sb-emulator.test", MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS as the advertised host with the -admin-cert file: %v", err)
	}
	_ = conn.Close()
}

// -h documents the environment: the flags' variables, Microsoft's that are read, and
// those that are ignored.
func TestUsageNamesTheEnvironment(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, noEnv, &stderr); err == nil {
		t.Fatal("-h: no flag.ErrHelp")
	}
	for _, want := range []string{"-http-addr", "-advertise", "SBEMULATOR_ADDR", "SBEMULATOR_HTTP_ADDR", "EMULATOR_HTTP_PORT",
		"ACCEPT_EULA, SQL_SERVER, MSSQL_SA_PASSWORD, SQL_WAIT_INTERVAL", "CONFIG_PATH", "/ServiceBus_Emulator/ConfigFiles/Config.json", "go run"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not mention %q:\n%s", want, stderr.String())
		}
	}
}
