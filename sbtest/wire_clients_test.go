package sbtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	goamqp "github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// What clients other than the Go SDK with its emulator flag need from the server: AMQP
// over TLS (the SDKs without emulator support), addresses in every spelling, and the
// errorCondition of $management errors.

// tlsConfig trusts srv's certificate.
func tlsConfig(t *testing.T, srv *Server) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.CertificatePEM()) {
		t.Fatal("CertificatePEM is not a PEM certificate")
	}
	// go-amqp names the server by the Endpoint's host and port; the certificate names the IP.
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: "127.0.0.1"}
}

// TestServerAMQPOverTLS: the SDK without the emulator flag speaks AMQP over TLS ("amqps",
// AMQP 1.0 part 5.2) to the host and port of the Endpoint, as every SDK release without
// emulator support does, while the admin client speaks HTTPS to the same port; both
// work with only the server's certificate trusted.
func TestServerAMQPOverTLS(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	conn := strings.Replace(w.srv.ConnectionString(), ";UseDevelopmentEmulator=true", "", 1)
	client, err := azservicebus.NewClientFromConnectionString(conn, &azservicebus.ClientOptions{
		TLSConfig:    tlsConfig(t, w.srv),
		RetryOptions: azservicebus.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	s, err := client.NewSender("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("over tls")}, nil); err != nil {
		t.Fatalf("send over TLS: %v", err)
	}
	r, err := client.NewReceiverForQueue("q", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := receiveN(t, r, 1)[0]
	if string(m.Body) != "over tls" {
		t.Fatalf("received %q", m.Body)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatalf("complete over TLS: %v", err)
	}
	ac, err := admin.NewClientFromConnectionString(conn, w.srv.AdminClientOptions())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := ac.GetQueueRuntimeProperties(ctx, "q", nil)
	if err != nil {
		t.Fatalf("admin client on the same port: %v", err)
	}
	if rt.TotalMessageCount != 0 {
		t.Fatalf("TotalMessageCount %d after the complete, want 0", rt.TotalMessageCount)
	}
	// The plain AMQP client (the emulator flag) still works beside them.
	w.healthyClient(t, "q")(t)
}

// TestServerTLSFirstBytes: inside TLS, the protocol header starts AMQP (SASL or not)
// and anything else is HTTP, answered by the administration API.
func TestServerTLSFirstBytes(t *testing.T) {
	t.Parallel()
	w := newWire(t, nil)
	for _, hdr := range []string{amqp.ProtoHeaderSASL, amqp.ProtoHeaderAMQP} {
		tc, err := tls.Dial("tcp", w.srv.Addr().String(), tlsConfig(t, w.srv))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tc.Write([]byte(hdr)); err != nil {
			t.Fatal(err)
		}
		h, err := amqp.ReadProtoHeader(bufio.NewReader(tc))
		_ = tc.Close()
		if err != nil || string(h[:]) != hdr {
			t.Fatalf("protocol header %q inside TLS answered with %q, %v; want the same header", hdr, h[:], err)
		}
	}
	tc, err := tls.Dial("tcp", w.srv.Addr().String(), tlsConfig(t, w.srv))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	if _, err := tc.Write([]byte("GET /$namespaceinfo HTTP/1.1\r\nHost: sbtest\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(tc).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("HTTP request inside TLS answered %q, %v; want HTTP/1.1 200", line, err)
	}
}

// TestServerAddressSpellings: a link attaches to an entity however the client spells
// it: a URI with or without the port (the Python SDK's uamqp drops it), the Java SDK's
// lower-case "subscriptions" and "$deadletterqueue", another letter case for the name
// (resource names are case-insensitive), surrounding slashes.
func TestServerAddressSpellings(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"Orders": nil},
		Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}}})
	host := w.srv.Addr().String()
	_, sess := amqpSession(t, w.srv)
	ctx := wireCtx(t)
	for _, addr := range []string{"Orders", "orders", "/ORDERS/", "amqps://" + host + "/orders", "amqps://127.0.0.1/Orders/",
		"t", "T/", "amqps://127.0.0.1/t"} {
		snd, err := sess.NewSender(ctx, addr, nil)
		if err != nil {
			t.Fatalf("sending link to %q: %v", addr, err)
		}
		if err := snd.Send(ctx, goamqp.NewMessage([]byte(addr)), nil); err != nil {
			t.Fatalf("send to %q: %v", addr, err)
		}
		_ = snd.Close(ctx)
	}
	q, _ := w.srv.Namespace().Entity("Orders")
	if n := len(q.Active()); n != 5 {
		t.Fatalf("queue Orders holds %d messages, want the 5 sent to its spellings", n)
	}
	sub, _ := w.srv.Namespace().Entity("t/Subscriptions/s")
	if n := len(sub.Active()); n != 3 {
		t.Fatalf("subscription t/Subscriptions/s holds %d messages, want the 3 sent to the topic's spellings", n)
	}
	for _, addr := range []string{"t/subscriptions/s", "amqps://127.0.0.1/T/SUBSCRIPTIONS/S/", "t/Subscriptions/s/$deadletterqueue",
		"orders/$DEADLETTERQUEUE", "amqps://" + host + "/orders/$deadletterqueue"} {
		rcv, err := sess.NewReceiver(ctx, addr, nil)
		if err != nil {
			t.Fatalf("receiving link from %q: %v", addr, err)
		}
		_ = rcv.Close(ctx)
	}
	if _, err := sess.NewReceiver(ctx, "t/subscriptions/nope", nil); err == nil {
		t.Fatal("a receiving link from a missing subscription was attached")
	}
}

// TestServerSessionSourceEcho: the Python SDK's uamqp attaches a session receiver to
// amqps://host/entity, without the port its connection string's Endpoint has, and then
// compares the source the server echoes with amqps://host:port/entity (azure-servicebus
// 7.x receiver_mixins.py _on_attach): the echo names the entity as the client's token
// audience did, port included, so that the SDK learns the session's id and lock expiry.
func TestServerSessionSourceEcho(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"s": {RequiresSession: true}}})
	port := w.srv.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":"):]
	for _, tc := range []struct{ audience, source, want string }{
		{"sb://127.0.0.1" + port + "/s", "amqps://127.0.0.1/s", "amqps://127.0.0.1" + port + "/s"},
		{"sb://LocalHost" + port + "/s", "amqps://localhost/s", "amqps://LocalHost" + port + "/s"},
		{"sb://127.0.0.1/s", "amqps://127.0.0.1/s", "amqps://127.0.0.1/s"}, // no port to give back
		{"sb://127.0.0.1" + port + "/s", "s", "s"},                         // not a URI
	} {
		// A session of its own: the previous case's is released after its connection.
		id := tc.audience + " " + tc.source
		if err := w.sender(t, "s").SendMessage(wireCtx(t), &azservicebus.Message{Body: []byte("m"), SessionID: &id}, nil); err != nil {
			t.Fatal(err)
		}
		c := dialRaw(t, w.srv)
		c.open()
		c.beginSession(100)
		putTokenFor(t, c, tc.audience)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "r", Handle: 2, Role: amqp.RoleReceiver,
			RcvSettleMode: amqp.Ptr(amqp.ReceiverSettleSecond), Target: &amqp.Target{Address: "raw"},
			Source: &amqp.Source{Address: tc.source, Filter: amqp.Map{{Key: sessionFilterName, Value: id}}}}, nil)
		for {
			fr := c.readFrame()
			a, ok := fr.Body.(*amqp.Attach)
			if !ok || a.Handle != 2 {
				continue
			}
			if a.Source == nil {
				t.Fatalf("session link on %q refused", tc.source)
			}
			if a.Source.Address != tc.want {
				t.Errorf("audience %q, source %q: echoed %q, want %q", tc.audience, tc.source, a.Source.Address, tc.want)
			}
			break
		}
		_ = c.nc.Close()
	}
}

// putTokenFor attaches $cbs links on handles 0 and 1 of c's session, puts a token for
// audience, and returns the response's status code and description; a status outside
// 2xx fails the test.
func putTokenFor(t *testing.T, c *rawConn, audience string) (int32, string) {
	t.Helper()
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "cbs-sender", Handle: 0, Role: amqp.RoleSender,
		Source: &amqp.Source{}, Target: &amqp.Target{Address: cbsNode}}, nil)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "cbs-receiver", Handle: 1, Role: amqp.RoleReceiver,
		Source: &amqp.Source{Address: cbsNode}, Target: &amqp.Target{Address: "cbs-reply"}}, nil)
	c.flow(0, 100, 0, 10, false)
	writePutToken(t, c, "1", amqp.Ptr("cbs-reply"), audience)
	for {
		fr := c.readFrame()
		if tr, ok := fr.Body.(*amqp.Transfer); ok && tr.Handle == 1 {
			var resp amqp.Message
			if err := resp.UnmarshalBinary(fr.Payload); err != nil {
				t.Fatal(err)
			}
			code, _ := mapGet(resp.ApplicationProperties, "status-code")
			desc, _ := mapGet(resp.ApplicationProperties, "status-description")
			if c, _ := code.(int32); c < 200 || c > 299 {
				t.Fatalf("put-token for %q answered %v", audience, code)
			}
			d, _ := desc.(string)
			return code.(int32), d
		}
	}
}

// writePutToken sends a put-token request for audience as delivery 0 on handle 0 of c's
// session.
func writePutToken(t *testing.T, c *rawConn, messageID any, replyTo *string, audience string) {
	t.Helper()
	req := &amqp.Message{
		Properties: &amqp.Properties{MessageID: messageID, ReplyTo: replyTo},
		ApplicationProperties: amqp.Map{{Key: "operation", Value: "put-token"},
			{Key: "type", Value: "servicebus.windows.net:sastoken"}, {Key: "name", Value: audience}},
		Value: "SharedAccessSignature sr=x&sig=y&se=1&skn=k", HasValue: true,
	}
	payload, err := req.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Transfer{Handle: 0, DeliveryID: amqp.Ptr(uint32(0)),
		DeliveryTag: []byte("t"), MessageFormat: amqp.Ptr(uint32(0)), Settled: true}, payload)
}

// mgmtClient sends $management requests to one entity over go-amqp.
type mgmtClient struct {
	snd *goamqp.Sender
	rcv *goamqp.Receiver
	n   int
}

func newMgmtClient(t *testing.T, sess *goamqp.Session, entity string) *mgmtClient {
	t.Helper()
	ctx := wireCtx(t)
	snd, err := sess.NewSender(ctx, entity+mgmtNodeSuffix, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, entity+mgmtNodeSuffix, &goamqp.ReceiverOptions{TargetAddress: "mgmt-reply", Credit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return &mgmtClient{snd: snd, rcv: rcv}
}

// do sends operation op with body and extra application properties, and returns the
// response's application properties.
func (m *mgmtClient) do(t *testing.T, op string, body map[string]any, props map[string]any) map[string]any {
	t.Helper()
	return m.request(t, op, body, props).ApplicationProperties
}

// request sends operation op with body and extra application properties, and returns
// the response.
func (m *mgmtClient) request(t *testing.T, op string, body map[string]any, props map[string]any) *goamqp.Message {
	t.Helper()
	ctx := wireCtx(t)
	m.n++
	ap := map[string]any{"operation": op}
	for k, v := range props {
		ap[k] = v
	}
	req := &goamqp.Message{
		Properties:            &goamqp.MessageProperties{MessageID: uint64(m.n), ReplyTo: ptr("mgmt-reply")},
		ApplicationProperties: ap,
		Value:                 body,
	}
	if err := m.snd.Send(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	resp, err := m.rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.rcv.AcceptMessage(ctx, resp)
	return resp
}

// TestServerManagementErrorCondition: an unsuccessful $management response names its
// error in the errorCondition application property, a symbol, as the service does: the
// Python, .NET, Java and JavaScript SDKs map it to their error types (azure-servicebus
// 7.x mgmt_handlers.py: MessageLockLostError for com.microsoft:message-lock-lost,
// SessionLockLostError for com.microsoft:session-lock-lost, MessageNotFoundError for
// com.microsoft:message-not-found).
func TestServerManagementErrorCondition(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil, "s": {RequiresSession: true}}})
	_, sess := amqpSession(t, w.srv)
	q := newMgmtClient(t, sess, "q")
	check := func(what string, props map[string]any, code int32, cond string) {
		t.Helper()
		// go-amqp decodes symbols as strings; the encoding is checked below.
		if props["statusCode"] != code || props["errorCondition"] != cond {
			t.Errorf("%s: statusCode %v, errorCondition %#v; want %d and %s", what,
				props["statusCode"], props["errorCondition"], code, cond)
		}
	}
	unknown := [16]byte{1, 2, 3}
	check("renew-lock of an unknown lock token", q.do(t, opRenewLock,
		map[string]any{"lock-tokens": []goamqp.UUID{unknown}}, nil), 410, "com.microsoft:message-lock-lost")
	check("update-disposition of an unknown lock token", q.do(t, opUpdateDisp,
		map[string]any{"lock-tokens": []goamqp.UUID{unknown}, "disposition-status": "completed"}, nil), 410, "com.microsoft:message-lock-lost")
	check("receive-by-sequence-number of a message that is not there", q.do(t, opReceiveBySeq,
		map[string]any{"sequence-numbers": []int64{99}, "receiver-settle-mode": uint32(1)}, nil), 404, "com.microsoft:message-not-found")
	check("renew-lock without lock tokens", q.do(t, opRenewLock, map[string]any{}, nil), 400, "com.microsoft:argument-error")
	check("an operation sbtest does not emulate", q.do(t, "com.microsoft:add-rule", map[string]any{}, nil), 501, "amqp:not-implemented")
	if ok := q.do(t, opPeek, map[string]any{"from-sequence-number": int64(1), "message-count": int32(1)}, nil); ok["errorCondition"] != nil {
		t.Errorf("a successful response carries errorCondition %v", ok["errorCondition"])
	}

	// A session whose lock is lost: com.microsoft:session-lock-lost.
	if err := w.sender(t, "s").SendMessage(wireCtx(t), &azservicebus.Message{Body: []byte("m"), SessionID: ptr("a")}, nil); err != nil {
		t.Fatal(err)
	}
	e, _ := w.srv.Namespace().Entity("s")
	e.InjectFault(Fault{Op: OpRenewSessionLock, Err: &azservicebus.Error{Code: azservicebus.CodeLockLost}})
	sr, err := sess.NewReceiver(wireCtx(t), "s", &goamqp.ReceiverOptions{Name: "session-a",
		Filters: []goamqp.LinkFilter{goamqp.NewLinkFilter(string(sessionFilterName), 0x137000000C, "a")}})
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close(context.Background())
	sm := newMgmtClient(t, sess, "s")
	check("renew-session-lock of a lost session", sm.do(t, opRenewSessionLock, map[string]any{"session-id": "a"},
		map[string]any{propAssociatedLink: "session-a"}), 410, "com.microsoft:session-lock-lost")
}

// TestServerDeliveryFidelity: what a delivery carries, as the service sends it (SDK live
// test TestSender_SendAMQPMessageWithMultipleByteSlicesInData): the header without
// first-acquirer, the client's own x-opt-* message annotations beside the broker's, no
// x-opt-message-state for an active message, the lock token as the x-opt-lock-token
// delivery annotation; the properties of the bare message as sent (AMQP 1.0 part 3.2:
// the bare message is immutable), a uuid message-id included, but creation-time and
// absolute-expiry-time, which are the broker's: the enqueued time and, for a message
// without a time-to-live, 9999-12-31 (.NET's DateTime.MaxValue).
func TestServerDeliveryFidelity(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	_, sess := amqpSession(t, w.srv)
	ctx := wireCtx(t)
	snd, err := sess.NewSender(ctx, "q", nil)
	if err != nil {
		t.Fatal(err)
	}
	id := goamqp.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	created := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	sent := &goamqp.Message{
		Header:      &goamqp.MessageHeader{Durable: true, Priority: 7},
		Annotations: goamqp.Annotations{"x-opt-custom": "kept", "custom": int64(1)},
		Properties: &goamqp.MessageProperties{MessageID: id, UserID: []byte("user"), ContentEncoding: ptr("gzip"),
			CreationTime: &created, GroupSequence: ptr(uint32(9)), CorrelationID: uint64(42)},
		Data: [][]byte{[]byte("body")},
	}
	if err := snd.Send(ctx, sent, nil); err != nil {
		t.Fatal(err)
	}
	rcv, err := sess.NewReceiver(ctx, "q", &goamqp.ReceiverOptions{SettlementMode: goamqp.ReceiverSettleModeSecond.Ptr()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rcv.Receive(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header == nil || m.Header.FirstAcquirer || m.Header.Priority != 7 {
		t.Errorf("header %+v, want priority 7 and no first-acquirer", m.Header)
	}
	if m.Annotations["x-opt-custom"] != "kept" || m.Annotations["custom"] != int64(1) || m.Annotations["x-opt-sequence-number"] == nil {
		t.Errorf("message annotations %v, want the client's x-opt-custom and custom beside the broker's", m.Annotations)
	}
	if _, ok := m.Annotations["x-opt-message-state"]; ok {
		t.Errorf("an active message carries x-opt-message-state %v", m.Annotations["x-opt-message-state"])
	}
	var tagToken [16]byte
	copy(tagToken[:], deliveryTag([16]byte(m.DeliveryTag))) // the swap is its own inverse
	if tok, ok := m.DeliveryAnnotations["x-opt-lock-token"].(goamqp.UUID); !ok || tok != tagToken {
		t.Errorf("delivery annotations %v, want x-opt-lock-token %x (the delivery tag's token)", m.DeliveryAnnotations, tagToken)
	}
	p := m.Properties
	if p == nil || p.MessageID != id || string(p.UserID) != "user" || p.ContentEncoding == nil || *p.ContentEncoding != "gzip" ||
		p.GroupSequence == nil || *p.GroupSequence != 9 || p.CorrelationID != uint64(42) {
		t.Errorf("properties %+v, want those sent: %+v", p, sent.Properties)
	}
	if enq, _ := m.Annotations["x-opt-enqueued-time"].(time.Time); p != nil && (p.CreationTime == nil || !p.CreationTime.Equal(enq)) {
		t.Errorf("creation-time %v, want the enqueued time %v", p.CreationTime, enq)
	}
	if p != nil && (p.AbsoluteExpiryTime == nil || !p.AbsoluteExpiryTime.Equal(noExpiry)) {
		t.Errorf("absolute-expiry-time %v of a message without a time-to-live, want %v", p.AbsoluteExpiryTime, noExpiry)
	}
	if err := rcv.AcceptMessage(ctx, m); err != nil {
		t.Fatal(err)
	}

	// The same through $management (peek), and what the SDK makes of it.
	if err := snd.Send(ctx, goamqp.NewMessage([]byte("peeked")), nil); err != nil {
		t.Fatal(err)
	}
	resp := newMgmtClient(t, sess, "q").request(t, opPeek, map[string]any{"from-sequence-number": int64(0), "message-count": int32(1)}, nil)
	msgs, _ := resp.Value.(map[string]any)["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("peek response %v, want one message", resp.Value)
	}
	var peeked goamqp.Message
	if err := peeked.UnmarshalBinary(msgs[0].(map[string]any)["message"].([]byte)); err != nil {
		t.Fatal(err)
	}
	if e := peeked.Properties.AbsoluteExpiryTime; e == nil || !e.Equal(noExpiry) {
		t.Errorf("peeked absolute-expiry-time %v, want %v", e, noExpiry)
	}
	r := w.receiver(t, "q", nil)
	pm, err := r.PeekMessages(ctx, 1, nil)
	if err != nil || len(pm) != 1 || pm[0].State != azservicebus.MessageStateActive {
		t.Fatalf("the SDK peeks %v, %v; want one active message", pm, err)
	}
}

// TestServerPutTokenAccepted: the $cbs node answers a put-token with 202 Accepted, as the
// service does; every SDK takes any 2xx (Azure/azure-amqp AmqpCbsLink.SendTokenAsync
// checks Accepted first).
func TestServerPutTokenAccepted(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	if code, desc := putTokenFor(t, c, "sb://"+w.srv.Addr().String()+"/q"); code != 202 || desc != "Accepted" {
		t.Fatalf("put-token answered %d %q, want 202 Accepted", code, desc)
	}
}
