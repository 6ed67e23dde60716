package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/deadletter"
)

// envFromOS returns the environment variables sbctl reads.
func envFromOS() func(string) string { return os.Getenv }

// common holds the flags every command has: the connection, the entity and the output.
type common struct {
	env       func(string) string
	connStr   string
	namespace string
	adminCA   string
	queue     string
	topic     string
	sub       string
	json      bool
}

func (c *common) register(fs *flag.FlagSet, env func(string) string) {
	c.env = env
	fs.StringVar(&c.connStr, "connection-string", "", "connection string (default $SERVICEBUS_CONNECTION_STRING)")
	fs.StringVar(&c.namespace, "namespace", "", "namespace `NAME` or host, with DefaultAzureCredential (default $SERVICEBUS_NAMESPACE)")
	fs.StringVar(&c.adminCA, "admin-ca", "", "PEM `FILE` of a certificate the administration API may use (default $SBCTL_ADMIN_CA)")
	fs.StringVar(&c.queue, "queue", "", "the queue")
	fs.StringVar(&c.topic, "topic", "", "the topic")
	fs.StringVar(&c.sub, "subscription", "", "the subscription of --topic")
	fs.BoolVar(&c.json, "json", false, "write JSON (one object per line for messages) instead of text")
}

// entity checks the entity flags: a queue, or a topic with a subscription (needSub), or
// a topic alone (when !needSub).
func (c *common) entity(needSub bool) error {
	switch {
	case c.queue != "" && c.topic != "":
		return usagef("give --queue or --topic, not both")
	case c.queue != "" && c.sub != "":
		return usagef("--subscription goes with --topic, not --queue")
	case c.queue == "" && c.topic == "":
		return usagef("give --queue, or --topic (with --subscription)")
	case c.topic != "" && needSub && c.sub == "":
		return usagef("give --subscription with --topic")
	}
	return nil
}

// name is the entity's path, for messages.
func (c *common) name() string {
	if c.topic != "" && c.sub != "" {
		return c.topic + "/subscriptions/" + c.sub
	}
	if c.topic != "" {
		return c.topic
	}
	return c.queue
}

func (c *common) connection() (connStr, host string, err error) {
	connStr, ns := c.connStr, c.namespace
	if connStr == "" && ns == "" {
		connStr, ns = c.env("SERVICEBUS_CONNECTION_STRING"), c.env("SERVICEBUS_NAMESPACE")
	}
	switch {
	case connStr != "":
		return connStr, "", nil
	case ns != "":
		if !strings.Contains(ns, ".") {
			ns += ".servicebus.windows.net"
		}
		return "", ns, nil
	}
	return "", "", usagef("no connection: give --connection-string or --namespace (or set SERVICEBUS_CONNECTION_STRING or SERVICEBUS_NAMESPACE)")
}

// newCredential makes the credential of --namespace: azidentity's
// DefaultAzureCredential, which finds one in the environment (AZURE_CLIENT_ID and its
// kin, a workload or managed identity, or a developer tool's sign-in such as az login;
// AZURE_TOKEN_CREDENTIALS narrows the search). A variable, so that a test can give a
// fake one.
var newCredential = func() (azcore.TokenCredential, error) { return azidentity.NewDefaultAzureCredential(nil) }

// client makes the data-plane client.
func (c *common) client() (*azservicebus.Client, error) {
	connStr, host, err := c.connection()
	if err != nil {
		return nil, err
	}
	if connStr != "" {
		cl, err := azservicebus.NewClientFromConnectionString(connStr, nil)
		if err != nil {
			return nil, fmt.Errorf("connection string: %w", err)
		}
		return cl, nil
	}
	cred, err := newCredential()
	if err != nil {
		return nil, fmt.Errorf("DefaultAzureCredential: %w", err)
	}
	return azservicebus.NewClient(host, cred, nil)
}

// adminClient makes the administration client.
func (c *common) adminClient() (*admin.Client, error) {
	connStr, host, err := c.connection()
	if err != nil {
		return nil, err
	}
	opts := &admin.ClientOptions{}
	caFile := c.adminCA
	if caFile == "" {
		caFile = c.env("SBCTL_ADMIN_CA")
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--admin-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--admin-ca: %s holds no PEM certificate", caFile)
		}
		opts.ClientOptions = azcore.ClientOptions{Transport: &http.Client{
			Timeout:   time.Minute,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		}}
	}
	if connStr != "" {
		return admin.NewClientFromConnectionString(connStr, opts)
	}
	cred, err := newCredential()
	if err != nil {
		return nil, fmt.Errorf("DefaultAzureCredential: %w", err)
	}
	return admin.NewClient(host, cred, opts)
}

// stringList is a flag that may be repeated.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// filterFlags are the flags of a deadletter.Filter.
type filterFlags struct {
	reasons     stringList
	description string
	after       string
	before      string
	props       stringList
	ids         stringList
}

func (f *filterFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.reasons, "reason", "only dead letters with this `DeadLetterReason` (repeat for several)")
	fs.StringVar(&f.description, "description", "", "only dead letters whose DeadLetterErrorDescription contains `TEXT`")
	fs.StringVar(&f.after, "enqueued-after", "", "only messages enqueued at or after `TIME` (RFC 3339)")
	fs.StringVar(&f.before, "enqueued-before", "", "only messages enqueued before `TIME` (RFC 3339)")
	fs.Var(&f.props, "property", "only messages whose application property `NAME=VALUE` (repeat for several)")
	fs.Var(&f.ids, "message-id", "only the message with this `ID` (repeat for several)")
}

// filter returns the Filter the flags describe; nil when none is set.
func (f *filterFlags) filter() (*deadletter.Filter, error) {
	var out deadletter.Filter
	set := false
	if len(f.reasons) > 0 {
		out.Reasons, set = f.reasons, true
	}
	if f.description != "" {
		out.DescriptionContains, set = f.description, true
	}
	for _, tf := range []struct {
		flag string
		s    string
		t    *time.Time
	}{{"--enqueued-after", f.after, &out.EnqueuedAfter}, {"--enqueued-before", f.before, &out.EnqueuedBefore}} {
		if tf.s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, tf.s)
		if err != nil {
			return nil, usagef("%s: %v", tf.flag, err)
		}
		*tf.t, set = t, true
	}
	for _, p := range f.props {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usagef("--property %q: want NAME=VALUE", p)
		}
		if out.Properties == nil {
			out.Properties = map[string]string{}
		}
		out.Properties[k], set = v, true
	}
	if len(f.ids) > 0 {
		out.MessageIDs, set = f.ids, true
	}
	if !set {
		return nil, nil
	}
	return &out, nil
}

// newFlagSet makes a command's flag set, whose -h prints the command's usage, its
// examples and the exit codes.
func newFlagSet(name, synopsis, examples string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sbctl %s\n\n%s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
		if examples != "" {
			fmt.Fprintf(stderr, "\nExamples:\n%s\n", examples)
		}
		fmt.Fprintf(stderr, "\n%s", exitCodes)
	}
	return fs
}

// parse parses args, turning a parse error into a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
