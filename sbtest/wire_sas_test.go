package sbtest

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// With ServerOptions.SASKeys, the SDK's clients work with a right key, and a wrong one is
// refused as by the service ("Service Bus access control with Shared Access
// Signatures"): amqp:unauthorized-access (CodeUnauthorizedAccess) over AMQP, 401 from the
// administration API; GET /health stays open.
func TestServerSASAuthorization(t *testing.T) {
	t.Parallel()
	srv := NewTestServer(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}, SASKeys: map[string]string{
		"RootManageSharedAccessKey": "right-key", "other": "other-key"}})
	ctx := wireCtx(t)
	good := srv.ConnectionString()
	if !strings.Contains(good, "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=right-key") {
		t.Fatalf("connection string %q, want the first key", good)
	}
	bad := strings.Replace(good, "right-key", "wrong-key", 1)
	unknown := strings.Replace(good, "RootManageSharedAccessKey", "nobody", 1)

	send := func(cs string) error {
		c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		s, err := c.NewSender("q", nil)
		if err != nil {
			t.Fatal(err)
		}
		return s.SendMessage(ctx, &azservicebus.Message{Body: []byte("x")}, nil)
	}
	if err := send(good); err != nil {
		t.Fatalf("send with the right key: %v", err)
	}
	for name, cs := range map[string]string{"wrong key": bad, "unknown key name": unknown} {
		var se *azservicebus.Error
		if err := send(cs); !errors.As(err, &se) || se.Code != azservicebus.CodeUnauthorizedAccess {
			t.Errorf("send with a %s: %v, want CodeUnauthorizedAccess", name, err)
		}
	}
	if n := srv.Namespace(); n != nil {
		if q, _ := n.Entity("q"); q.Counts().Active != 1 {
			t.Errorf("queue holds %+v, want the one message sent with the right key", q.Counts())
		}
	}

	adminWith := func(cs string) error {
		ac, err := admin.NewClientFromConnectionString(cs, srv.AdminClientOptions())
		if err != nil {
			t.Fatal(err)
		}
		_, err = ac.GetQueue(ctx, "q", nil)
		return err
	}
	if err := adminWith(good); err != nil {
		t.Fatalf("admin with the right key: %v", err)
	}
	var re *azcore.ResponseError
	if err := adminWith(bad); !errors.As(err, &re) || re.StatusCode != http.StatusUnauthorized {
		t.Errorf("admin with a wrong key: %v, want 401", err)
	}
	resp, err := srv.AdminHTTPClient().Get("https://" + srv.Addr().String() + "/$Resources/Queues")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("admin without Authorization: %s, want 401", resp.Status)
	}
	resp, err = srv.AdminHTTPClient().Get("https://" + srv.Addr().String() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /health without Authorization: %s, want 200", resp.Status)
	}
}
