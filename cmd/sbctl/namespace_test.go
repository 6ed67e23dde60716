package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

func TestConnectionFlags(t *testing.T) {
	for _, tt := range []struct {
		name       string
		args       []string
		env        map[string]string
		conn, host string
		usage      bool
	}{
		{name: "namespace name", args: []string{"--namespace", "myns"}, host: "myns.servicebus.windows.net"},
		{name: "fully qualified namespace", args: []string{"--namespace", "myns.servicebus.usgovcloudapi.net"}, host: "myns.servicebus.usgovcloudapi.net"},
		{name: "namespace from the environment", env: map[string]string{"SERVICEBUS_NAMESPACE": "envns"}, host: "envns.servicebus.windows.net"},
		{name: "connection string from the environment", env: map[string]string{"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=v"}, conn: "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=v"},
		{name: "a flag wins over the environment", args: []string{"--namespace", "flagns"}, env: map[string]string{"SERVICEBUS_CONNECTION_STRING": "Endpoint=sb://x/"}, host: "flagns.servicebus.windows.net"},
		{name: "nothing", usage: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var c common
			fs := newFlagSet("t", "", "", &bytes.Buffer{})
			c.register(fs, func(k string) string { return tt.env[k] })
			if err := parse(fs, tt.args); err != nil {
				t.Fatal(err)
			}
			conn, host, err := c.connection()
			var u usageError
			if tt.usage != errors.As(err, &u) || conn != tt.conn || host != tt.host {
				t.Fatalf("connection() = %q, %q, %v; want %q, %q, usage error %v", conn, host, err, tt.conn, tt.host, tt.usage)
			}
		})
	}
}

// fakeCredentialEnv makes the test binary a child of TestNamespaceCredentialAndHost.
const fakeCredentialEnv = "SBCTL_TEST_FAKE_CREDENTIAL"

// fakeCredential returns a token for any scope and records the scopes asked for.
type fakeCredential struct{ scopes []string }

func (f *fakeCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	f.scopes = append(f.scopes, o.Scopes...)
	return azcore.AccessToken{Token: "fake", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestNamespaceCredentialAndHost runs `sbctl stats --namespace myns` with a fake
// credential in a child process whose HTTPS proxy is a listener of this test (no network
// needed): the credential is asked for a Service Bus token and the administration API
// request goes to the fully qualified namespace (the proxy sees CONNECT to it).
func TestNamespaceCredentialAndHost(t *testing.T) {
	if os.Getenv(fakeCredentialEnv) != "" {
		fake := &fakeCredential{}
		newCredential = func() (azcore.TokenCredential, error) { return fake, nil }
		var out, errb bytes.Buffer
		code := run(t.Context(), []string{"stats", "--namespace", "myns"}, strings.NewReader(""), &out, &errb)
		fmt.Printf("exit %d, scopes %q\n%s", code, fake.scopes, errb.String())
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	requests := make(chan string, 10)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(conn).ReadString('\n')
			requests <- strings.TrimSpace(line)
			conn.Close() // the request fails: nothing is reached
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^TestNamespaceCredentialAndHost$", "-test.v")
	cmd.Env = append(os.Environ(), fakeCredentialEnv+"=1", "HTTPS_PROXY=http://"+ln.Addr().String(), "https_proxy=", "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	select {
	case got := <-requests:
		if want := "CONNECT myns.servicebus.windows.net:443 HTTP/1.1"; got != want {
			t.Errorf("the proxy got %q, want %q", got, want)
		}
	default:
		t.Errorf("no request reached the proxy; the child printed:\n%s", out)
	}
	// The administration client asks for "https://servicebus.azure.net//.default": its
	// resource, with a trailing slash, then /.default.
	if !strings.Contains(string(out), `exit 1, scopes ["https://servicebus.azure.net/`) || !strings.Contains(string(out), `/.default"`) {
		t.Errorf("want exit 1 after a Service Bus token was asked for; the child printed:\n%s", out)
	}
}

// TestNamespaceWithoutCredential runs the binary with --namespace where no credential
// can be found (no AZURE_* variables, no developer tool on PATH, the managed identity
// endpoint unreachable through a refused proxy): it fails at once with exit 1 and says
// what DefaultAzureCredential tried. (The data plane dials the namespace before it asks
// for a token, so offline its error is the address lookup, after the SDK's retries.)
func TestNamespaceWithoutCredential(t *testing.T) {
	empty := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"stats", "--namespace", "myns"}, {"stats", "--queue", "orders"}} {
		cmd := exec.CommandContext(ctx, sbctlBin, args...)
		cmd.Env = []string{"HOME=" + empty, "PATH=" + empty, "HTTP_PROXY=http://127.0.0.1:1", "HTTPS_PROXY=http://127.0.0.1:1", "SERVICEBUS_NAMESPACE=myns"}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != exitError {
			t.Fatalf("%v: %v, want exit %d\nstderr:\n%s", args, err, exitError, errb.String())
		}
		for _, want := range []string{"DefaultAzureCredential", "EnvironmentCredential", "AzureCLICredential"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("%v: stderr does not name %s:\n%s", args, want, errb.String())
			}
		}
	}
}
