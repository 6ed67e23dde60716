package sbtest

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// dataClient calls the runtime REST API of a server with a plain net/http client.
type dataClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newDataClient(t *testing.T, srv *Server) *dataClient {
	return &dataClient{t: t, base: srv.AdminHTTPURL(), hc: &http.Client{Timeout: wireTimeout}}
}

// do sends a request and returns the response with its body read.
func (c *dataClient) do(method, url string, hdr map[string]string, body string) (*http.Response, string) {
	c.t.Helper()
	if !strings.HasPrefix(url, "http") {
		url = c.base + url
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "SharedAccessSignature sr=x&sig=y&se=1&skn=z")
	for k, v := range hdr {
		req.Header[k] = []string{v}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

// want fails the test unless resp has status.
func (c *dataClient) want(resp *http.Response, body string, status int) {
	c.t.Helper()
	if resp.StatusCode != status {
		c.t.Fatalf("%s %s: status %d (%s), want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, status)
	}
}

// broker decodes resp's BrokerProperties header.
func broker(t *testing.T, resp *http.Response) map[string]any {
	t.Helper()
	var bp map[string]any
	if err := json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp); err != nil {
		t.Fatalf("BrokerProperties %q: %v", resp.Header.Get("BrokerProperties"), err)
	}
	return bp
}

// TestServerHTTPDataSendOverHTTPReceiveOverAMQP: a message sent with Send Message
// (BrokerProperties, custom properties as headers, Content-Type) reaches an SDK receiver
// with every property, and is completed over AMQP.
func TestServerHTTPDataSendOverHTTPReceiveOverAMQP(t *testing.T) {
	w := newWire(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil}})
	c := newDataClient(t, w.srv)
	sched := time.Now().Add(-time.Second).UTC().Truncate(time.Second)
	resp, body := c.do("POST", "/q/messages", map[string]string{
		"Content-Type":     "application/json",
		"BrokerProperties": `{"MessageId":"m-1","Label":"greeting","CorrelationId":"c-1","ReplyTo":"r","To":"t","TimeToLive":90,"ScheduledEnqueueTimeUtc":"` + sched.Format(http.TimeFormat) + `","Ignored":1}`,
		"Priority":         `"High"`,
		"Count":            "7",
		"Ratio":            "1.5",
		"Flag":             "true",
		"Bare":             "plain text",
	}, `{"hello":"world"}`)
	c.want(resp, body, http.StatusCreated)
	r := w.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	if string(m.Body) != `{"hello":"world"}` || m.MessageID != "m-1" || *m.Subject != "greeting" || *m.CorrelationID != "c-1" ||
		*m.ReplyTo != "r" || *m.To != "t" || *m.ContentType != "application/json" || *m.TimeToLive != 90*time.Second {
		t.Fatalf("received %+v", m)
	}
	wantProps := map[string]any{"Priority": "High", "Count": int64(7), "Ratio": 1.5, "Flag": true, "Bare": "plain text"}
	for k, v := range wantProps {
		if m.ApplicationProperties[k] != v {
			t.Errorf("property %s = %#v, want %#v (all: %v)", k, m.ApplicationProperties[k], v, m.ApplicationProperties)
		}
	}
	for _, k := range []string{"Authorization", "User-Agent", "Content-Type", "Brokerproperties", "Accept-Encoding"} {
		if _, ok := m.ApplicationProperties[k]; ok {
			t.Errorf("header %s became a property", k)
		}
	}
	if err := r.CompleteMessage(wireCtx(t), m, nil); err != nil {
		t.Fatal(err)
	}
	if n := w.srv.Namespace().mustEntity(t, "q").Counts().Active; n != 0 {
		t.Fatalf("%d active after completing", n)
	}
}

// TestServerHTTPDataPeekLockUnlockRenewDelete: a message sent over AMQP is peek-locked
// over HTTP (201, BrokerProperties, Location, custom properties as headers), unlocked
// (its delivery count goes up), locked again, renewed and deleted through Location, in
// every documented status, and an SDK receiver sees the same locks and counts.
func TestServerHTTPDataPeekLockUnlockRenewDelete(t *testing.T) {
	w := newWire(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": {LockDuration: time.Minute}}})
	c := newDataClient(t, w.srv)
	ctx := wireCtx(t)

	resp, body := c.do("POST", "/q/messages/head?timeout=0", nil, "")
	c.want(resp, body, http.StatusNoContent)

	s := w.sender(t, "q")
	if err := s.SendMessage(ctx, &azservicebus.Message{MessageID: to.Ptr("m-2"), Body: []byte("amqp body"),
		ApplicationProperties: map[string]any{"orderId": "o-9", "n": int64(3)}}, nil); err != nil {
		t.Fatal(err)
	}
	resp, body = c.do("POST", "/q/messages/head?timeout=5", nil, "")
	c.want(resp, body, http.StatusCreated)
	bp := broker(t, resp)
	if body != "amqp body" || bp["MessageId"] != "m-2" || bp["DeliveryCount"] != 1.0 || bp["SequenceNumber"] == nil || bp["LockToken"] == nil {
		t.Fatalf("peek-lock: body %q, BrokerProperties %v", body, bp)
	}
	for _, k := range []string{"EnqueuedTimeUtc", "LockedUntilUtc"} {
		if _, err := http.ParseTime(bp[k].(string)); err != nil {
			t.Errorf("%s %q is not RFC 1123: %v", k, bp[k], err)
		}
	}
	if resp.Header.Get("orderId") != `"o-9"` || resp.Header.Get("n") != "3" {
		t.Fatalf("custom property headers: %v", resp.Header)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, c.base+"/q/messages/") || !strings.HasSuffix(loc, "/"+bp["LockToken"].(string)) {
		t.Fatalf("Location %q", loc)
	}
	// Locked: neither HTTP nor AMQP gets it meanwhile.
	resp, body = c.do("POST", "/q/messages/head?timeout=0", nil, "")
	c.want(resp, body, http.StatusNoContent)

	resp, body = c.do("PUT", loc, nil, "") // Unlock Message
	c.want(resp, body, http.StatusOK)
	resp, body = c.do("PUT", loc, nil, "") // the lock is gone
	c.want(resp, body, http.StatusNotFound)

	r := w.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	if m.DeliveryCount != 2 {
		t.Fatalf("delivery count over AMQP after an HTTP unlock: %d, want 2", m.DeliveryCount)
	}
	if err := r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}

	resp, body = c.do("POST", "/q/messages/head", nil, "")
	c.want(resp, body, http.StatusCreated)
	if bp := broker(t, resp); bp["DeliveryCount"] != 3.0 {
		t.Fatalf("delivery count over HTTP after an AMQP abandon: %v, want 3", bp["DeliveryCount"])
	}
	loc = resp.Header.Get("Location")
	before, _ := http.ParseTime(broker(t, resp)["LockedUntilUtc"].(string))
	time.Sleep(1100 * time.Millisecond)     // RFC 1123 dates have whole seconds
	resp, body = c.do("POST", loc, nil, "") // Renew-Lock
	c.want(resp, body, http.StatusOK)
	if after, err := http.ParseTime(broker(t, resp)["LockedUntilUtc"].(string)); err != nil || !after.After(before) {
		t.Fatalf("renewed lock until %v (%v), before %v", after, err, before)
	}
	resp, body = c.do("DELETE", loc, nil, "") // Delete Message: complete
	c.want(resp, body, http.StatusOK)
	resp, body = c.do("DELETE", loc, nil, "")
	c.want(resp, body, http.StatusNotFound)
	resp, body = c.do("POST", loc, nil, "")
	c.want(resp, body, http.StatusNotFound)
	if n := w.srv.Namespace().mustEntity(t, "q").Counts(); n.Active+n.Locked != 0 {
		t.Fatalf("counts %+v after Delete Message", n)
	}
}

// TestServerHTTPDataSettleAMQPLockOverHTTP: a message an SDK receiver holds is completed
// over HTTP by its lock token (the GUID of the .NET and JavaScript SDKs), after which the
// SDK's own completion reports the lock lost.
func TestServerHTTPDataSettleAMQPLockOverHTTP(t *testing.T) {
	w := newWire(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil}})
	c := newDataClient(t, w.srv)
	ctx := wireCtx(t)
	w.sendN(t, "q", 1)
	r := w.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	loc := "/q/messages/" + "1/" + lockTokenGUID(m.LockToken)
	resp, body := c.do("POST", loc, nil, "")
	c.want(resp, body, http.StatusOK)
	resp, body = c.do("DELETE", loc, nil, "")
	c.want(resp, body, http.StatusOK)
	var sbErr *azservicebus.Error
	if err := r.CompleteMessage(ctx, m, nil); !errors.As(err, &sbErr) || sbErr.Code != azservicebus.CodeLockLost {
		t.Fatalf("SDK completion after an HTTP one: %v, want CodeLockLost", err)
	}
}

// TestServerHTTPDataReceiveAndDeleteBatchTopic: Send Message Batch to a topic, Receive
// and Delete from its subscription (200, then 204), with the batch's properties.
func TestServerHTTPDataReceiveAndDeleteBatchTopic(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}}})
	c := newDataClient(t, srv)
	batch := `[{"Body":"This is the first message","BrokerProperties":{"Label":"M1","TimeToLiveTimeSpan":"0.00:00:40"}},
		{"Body":"This is the second message","UserProperties":{"Priority":"High","n":2}},
		{"Body":"This is the third message","BrokerProperties":{"Label":"M3"},"UserProperties":{"Priority":"Low"}}]`
	resp, body := c.do("POST", "/t/messages", map[string]string{"Content-Type": batchContentType}, batch)
	c.want(resp, body, http.StatusCreated)
	for i, want := range []string{"first", "second", "third"} {
		resp, body = c.do("DELETE", "/t/subscriptions/s/messages/head?timeout=1", nil, "")
		c.want(resp, body, http.StatusOK)
		bp := broker(t, resp)
		if !strings.Contains(body, want) || bp["LockToken"] != nil || resp.Header.Get("Location") != "" {
			t.Fatalf("message %d: %q, %v, Location %q", i, body, bp, resp.Header.Get("Location"))
		}
		switch i {
		case 0:
			if bp["Label"] != "M1" || bp["TimeToLive"] != 40.0 {
				t.Fatalf("first message's BrokerProperties %v", bp)
			}
		case 1:
			if resp.Header.Get("Priority") != `"High"` || resp.Header.Get("n") != "2" {
				t.Fatalf("second message's headers %v", resp.Header)
			}
		}
	}
	resp, body = c.do("DELETE", "/t/Subscriptions/s/messages/head?timeout=0", nil, "")
	c.want(resp, body, http.StatusNoContent)
}

// TestServerHTTPDataErrors: every documented error status, with the service's XML error
// body, and nothing sent or lost by a refused request.
func TestServerHTTPDataErrors(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0",
		NamespaceOptions: &NamespaceOptions{MaxMessageSize: 1024},
		Queues:           map[string]*EntityOptions{"q": nil, "sess": {RequiresSession: true}},
		Topics:           map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}}})
	c := newDataClient(t, srv)
	token := "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3"
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		body               string
		status             int
	}{
		{"send to a missing entity", "POST", "/nope/messages", nil, "x", http.StatusGone},
		{"peek-lock a missing entity", "POST", "/nope/messages/head?timeout=0", nil, "", http.StatusGone},
		{"receive-and-delete a missing subscription", "DELETE", "/t/subscriptions/nope/messages/head?timeout=0", nil, "", http.StatusGone},
		{"unlock in a missing entity", "PUT", "/nope/messages/1/" + token, nil, "", http.StatusGone},
		{"complete in a missing entity", "DELETE", "/nope/messages/1/" + token, nil, "", http.StatusGone},
		{"unlock an unknown lock", "PUT", "/q/messages/1/" + token, nil, "", http.StatusNotFound},
		{"complete an unknown lock", "DELETE", "/q/messages/1/" + token, nil, "", http.StatusNotFound},
		{"renew an unknown lock", "POST", "/q/messages/1/" + token, nil, "", http.StatusNotFound},
		{"a malformed lock token", "DELETE", "/q/messages/1/not-a-token", nil, "", http.StatusBadRequest},
		{"malformed BrokerProperties", "POST", "/q/messages", map[string]string{"BrokerProperties": "{"}, "x", http.StatusBadRequest},
		{"a negative TimeToLive", "POST", "/q/messages", map[string]string{"BrokerProperties": `{"TimeToLive":-1}`}, "x", http.StatusBadRequest},
		{"a date not in RFC 1123", "POST", "/q/messages", map[string]string{"BrokerProperties": `{"ScheduledEnqueueTimeUtc":"2030-01-01"}`}, "x", http.StatusBadRequest},
		{"SessionId and PartitionKey differ", "POST", "/q/messages", map[string]string{"BrokerProperties": `{"SessionId":"a","PartitionKey":"b"}`}, "x", http.StatusBadRequest},
		{"a malformed batch", "POST", "/q/messages", map[string]string{"Content-Type": batchContentType}, `{"Body":"x"}`, http.StatusBadRequest},
		{"an empty batch", "POST", "/q/messages", map[string]string{"Content-Type": batchContentType}, `[]`, http.StatusBadRequest},
		{"a batch property that is an object", "POST", "/q/messages", map[string]string{"Content-Type": batchContentType}, `[{"Body":"x","UserProperties":{"o":{}}}]`, http.StatusBadRequest},
		{"a message too large", "POST", "/q/messages", nil, strings.Repeat("x", 2000), http.StatusForbidden},
		{"a body far too large", "POST", "/q/messages", nil, strings.Repeat("x", 200_000), http.StatusForbidden},
		{"a batch too large", "POST", "/q/messages", map[string]string{"Content-Type": batchContentType}, `[{"Body":"` + strings.Repeat("x", 600) + `"},{"Body":"` + strings.Repeat("x", 600) + `"}]`, http.StatusForbidden},
		{"send to a subscription", "POST", "/t/subscriptions/s/messages", nil, "x", http.StatusBadRequest},
		{"a send without a session to a session queue", "POST", "/sess/messages", nil, "x", http.StatusBadRequest},
		{"peek-lock a session queue", "POST", "/sess/messages/head?timeout=0", nil, "", http.StatusBadRequest},
		{"a malformed timeout", "POST", "/q/messages/head?timeout=soon", nil, "", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			resp, body := c.do(tc.method, tc.path, tc.hdr, tc.body)
			c.want(resp, body, tc.status)
			var e atom.Error
			if err := xml.Unmarshal([]byte(body), &e); err != nil || e.Code != tc.status || e.Detail == "" {
				t.Fatalf("error body %q (%v), want <Error> with code %d", body, err, tc.status)
			}
		})
	}
	for _, path := range []string{"q", "sess", "t/Subscriptions/s"} {
		if n := srv.Namespace().mustEntity(t, path).Counts().Active; n != 0 {
			t.Fatalf("%s holds %d messages after refused requests", path, n)
		}
	}
}

// TestServerHTTPDataRoutes: the data plane and the administration API share the ports
// without taking each other's requests: entity CRUD, /health and an entity whose name
// holds a "messages" segment stay the administration API's; HTTPS on the AMQP port
// serves the data plane too, with an https Location.
func TestServerHTTPDataRoutes(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil}})
	c := newDataClient(t, srv)
	queue := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"/></content></entry>`
	resp, body := c.do("PUT", "/a/messages/b/c", nil, queue) // an entity named so: created by the admin API
	c.want(resp, body, http.StatusCreated)
	resp, body = c.do("GET", "/a/messages/b/c", nil, "")
	c.want(resp, body, http.StatusOK)
	resp, body = c.do("POST", "/a/messages/b/c/messages", nil, "to the odd queue")
	c.want(resp, body, http.StatusCreated)
	resp, body = c.do("DELETE", "/a/messages/b/c/messages/head?timeout=0", nil, "")
	c.want(resp, body, http.StatusOK)
	resp, body = c.do("DELETE", "/a/messages/b/c", nil, "") // names the entity: the admin API deletes it
	c.want(resp, body, http.StatusOK)
	if _, ok := srv.Namespace().Entity("a/messages/b/c"); ok {
		t.Fatal("the admin API did not delete the entity")
	}
	resp, body = c.do("GET", "/health", nil, "")
	c.want(resp, body, http.StatusOK)

	// HTTPS on the AMQP port.
	hc := srv.AdminHTTPClient()
	hc.Timeout = wireTimeout
	tc := &dataClient{t: t, base: "https://" + srv.w.Endpoint(), hc: hc}
	resp, body = tc.do("POST", "/q/messages", nil, "secure")
	tc.want(resp, body, http.StatusCreated)
	resp, body = tc.do("POST", "/q/messages/head", nil, "")
	tc.want(resp, body, http.StatusCreated)
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, tc.base+"/q/messages/") {
		t.Fatalf("Location %q over HTTPS", loc)
	}
	resp, body = tc.do("DELETE", loc, nil, "")
	tc.want(resp, body, http.StatusOK)
}

// TestServerHTTPDataLongPoll: a peek-lock waits for a message sent meanwhile (over
// AMQP), and a wait is cut to half the WriteTimeout so that the answer still leaves.
func TestServerHTTPDataLongPoll(t *testing.T) {
	w := newWire(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", WriteTimeout: 2 * time.Second, Queues: map[string]*EntityOptions{"q": nil}})
	c := newDataClient(t, w.srv)
	s := w.sender(t, "q")
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = s.SendMessage(context.Background(), &azservicebus.Message{Body: []byte("late")}, nil)
	}()
	resp, body := c.do("POST", "/q/messages/head?timeout=60", nil, "")
	c.want(resp, body, http.StatusCreated)
	if body != "late" {
		t.Fatalf("received %q", body)
	}
	start := time.Now()
	resp, body = c.do("POST", "/q/messages/head?timeout=60", nil, "") // empty now: waits 1 s, not 60
	c.want(resp, body, http.StatusNoContent)
	if d := time.Since(start); d < 900*time.Millisecond || d > wireTimeout/2 {
		t.Fatalf("an empty long poll answered after %v, want about 1 s", d)
	}
}

// adminConnCount is how many HTTP connections the server serves.
func (s *Server) adminConnCount() int {
	return s.w.AdminConns()
}

// TestServerHTTPDataHostile holds the data plane to the HTTP limits: a huge header is
// refused with 431, a body that trickles in is cut after WriteTimeout, and a client that
// never reads the message it asked for is disconnected after WriteTimeout, its lock kept
// until it expires as for any receiver.
func TestServerHTTPDataHostile(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", WriteTimeout: 500 * time.Millisecond,
		Queues: map[string]*EntityOptions{"q": nil}})
	c := newDataClient(t, srv)
	t.Run("huge header", func(t *testing.T) {
		// The server answers 431 and closes at once, so the client may see the reset of
		// the header bytes it never read instead: either way the request is refused.
		req, _ := http.NewRequest("POST", c.base+"/q/messages", strings.NewReader("x"))
		req.Header.Set("X-Big", strings.Repeat("a", 2*wire.MaxHeaderBytes))
		resp, err := c.hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Fatalf("status %d, want 431", resp.StatusCode)
			}
		}
		if n := srv.Namespace().mustEntity(t, "q").Counts().Active; n != 0 {
			t.Fatalf("a request with a huge header sent %d messages", n)
		}
	})
	t.Run("slow body", func(t *testing.T) {
		nc, err := net.Dial("tcp", srv.w.AdminHTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_, _ = nc.Write([]byte("POST /q/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")) // and 97 bytes never come
		_ = nc.SetReadDeadline(time.Now().Add(wireTimeout))
		start := time.Now()
		_, _ = io.Copy(io.Discard, nc)
		if d := time.Since(start); d > wireTimeout/2 {
			t.Fatalf("a trickling body held its connection %v", d)
		}
		if n := srv.Namespace().mustEntity(t, "q").Counts().Active; n != 0 {
			t.Fatalf("a partial body was sent: %d messages", n)
		}
	})
	t.Run("never reads", func(t *testing.T) {
		c.t = t
		resp, body := c.do("POST", "/q/messages", nil, strings.Repeat("m", 200_000))
		c.want(resp, body, http.StatusCreated)
		c.hc.CloseIdleConnections()
		eventually(t, "the sender's connection to be closed", func() bool { return srv.adminConnCount() == 0 })
		nc, err := smallBufferClient().Transport.(*http.Transport).DialContext(context.Background(), "tcp", srv.w.AdminHTTPAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_, _ = nc.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"))
		eventually(t, "the connection to be served", func() bool { return srv.adminConnCount() == 1 })
		// The same small buffer on the server's side (see dialRawNoRead), so that the
		// 200 KB answer cannot sit in the kernel's buffers.
		if err := srv.w.SetAdminWriteBuffers(8192); err != nil {
			t.Error(err)
		}
		_, _ = nc.Write([]byte("POST /q/messages/head?timeout=1 HTTP/1.1\r\nHost: x\r\n\r\n")) // and never read
		eventually(t, "the message to be locked", func() bool { return srv.Namespace().mustEntity(t, "q").Counts().Locked == 1 })
		eventually(t, "the connection to be closed", func() bool { return srv.adminConnCount() == 0 })
		if n := srv.Namespace().mustEntity(t, "q").Counts().Locked; n != 1 {
			t.Fatalf("%d messages locked after the client went away, want 1 (until the lock expires)", n)
		}
	})
}

// TestServerHTTPDataSAS: with ServerOptions.SASKeys the data plane needs a token that
// covers the entity in its Authorization header, as the administration API does (401
// otherwise, "Authorization failure" in the runtime REST API's status tables), and the
// SDK over WebSockets authorizes on $cbs as over TCP.
func TestServerHTTPDataSAS(t *testing.T) {
	srv := NewTestServer(t, &ServerOptions{AdminHTTPAddr: "127.0.0.1:0", Queues: map[string]*EntityOptions{"q": nil, "other": nil},
		SASKeys: map[string]string{"k": "secret"}})
	c := &dataClient{t: t, base: srv.AdminHTTPURL(), hc: &http.Client{Timeout: wireTimeout}}
	expiry := time.Now().Add(time.Hour).Unix()
	host := "sb://" + srv.w.Endpoint() + "/"
	for _, tc := range []struct {
		name, auth string
		status     int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a wrong key", wire.SignSAS("k", "wrong", host+"q", expiry), http.StatusUnauthorized},
		{"a token for another entity", wire.SignSAS("k", "secret", host+"other", expiry), http.StatusUnauthorized},
		{"a token for the entity", wire.SignSAS("k", "secret", host+"q", expiry), http.StatusCreated},
		{"a token for the namespace", wire.SignSAS("k", "secret", host, expiry), http.StatusCreated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			req, _ := http.NewRequest("POST", c.base+"/q/messages", strings.NewReader("x"))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := c.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if n := srv.Namespace().mustEntity(t, "q").Counts().Active; n != 2 {
		t.Fatalf("%d messages stored, want the 2 sent with valid tokens", n)
	}
	// Over WebSockets the SDK puts its token on $cbs: the right key works.
	client, err := azservicebus.NewClientFromConnectionString(srv.ConnectionString(), srv.WebSocketClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	r, err := client.NewReceiverForQueue("q", &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
	if err != nil {
		t.Fatal(err)
	}
	if got := receiveN(t, r, 2); string(got[0].Body) != "x" {
		t.Fatalf("received %q over WebSockets", got[0].Body)
	}
}
