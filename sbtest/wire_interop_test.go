package sbtest

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// TestServerResponseLinks drives the $cbs exchange the ways clients other than go-amqp
// do, all of which the service accepts.
func TestServerResponseLinks(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	// JavaScript (@azure/core-amqp 4.x cbs.js): the response link is named by the reply-to
	// address and has a target without an address (rhea: set_target({})).
	t.Run("reply-to names the link", func(t *testing.T) {
		t.Parallel()
		putToken(t, w.srv, "cbs-7e1f", &amqp.Target{}, amqp.Ptr("cbs-7e1f"), "req-1")
	})
	// Python (azure-servicebus _pyamqp management_link.py, cbs.py _put_token): the
	// response link's target is the node, the request has a ulong message-id and no
	// reply-to.
	t.Run("no reply-to", func(t *testing.T) {
		t.Parallel()
		putToken(t, w.srv, "cbs-receiver", &amqp.Target{Address: cbsNode}, nil, uint64(0))
	})
}

// putToken attaches a $cbs request link (handle 0) and a response link (handle 1) named
// name with target, sends a put-token request with replyTo and messageID, and checks
// that a 200 response correlated to messageID arrives on the response link.
func putToken(t *testing.T, srv *Server, name string, target *amqp.Target, replyTo *string, messageID any) {
	t.Helper()
	c := dialRaw(t, srv)
	c.open()
	c.beginSession(100)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "cbs-sender", Handle: 0, Role: amqp.RoleSender,
		Source: &amqp.Source{}, Target: &amqp.Target{Address: cbsNode}}, nil)
	if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Target == nil {
		t.Fatal("request link refused")
	}
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: name, Handle: 1, Role: amqp.RoleReceiver,
		Source: &amqp.Source{Address: cbsNode}, Target: target}, nil)
	for attached := false; !attached; { // skip the request link's credit
		switch b := c.readFrame().Body.(type) {
		case *amqp.Attach:
			if b.Source == nil {
				t.Fatal("response link refused")
			}
			attached = true
		case *amqp.Detach:
			t.Fatalf("detached: %+v", b.Error)
		}
	}
	c.flow(0, 100, 0, 10, false)
	writePutToken(t, c, messageID, replyTo, "sb://"+srv.Addr().String()+"/q")
	for {
		fr := c.readFrame()
		tr, ok := fr.Body.(*amqp.Transfer)
		if !ok {
			continue
		}
		if tr.Handle != 1 {
			t.Fatalf("response on handle %d, want 1", tr.Handle)
		}
		var resp amqp.Message
		if err := resp.UnmarshalBinary(fr.Payload); err != nil {
			t.Fatal(err)
		}
		if code, _ := mapGet(resp.ApplicationProperties, "status-code"); code != int32(202) {
			t.Fatalf("put-token answered with status %v (%T), want 202", code, code)
		}
		if resp.Properties == nil || resp.Properties.CorrelationID != messageID {
			t.Fatalf("response correlation-id %+v, want %v", resp.Properties, messageID)
		}
		return
	}
}

// TestServerFirstDeliveryCount pins what each client sees of the header's delivery-count:
// the server writes 0 on a first delivery (the JavaScript SDK reports it as is, and its
// live tests expect 0), which the Go SDK reports as DeliveryCount 1 (it adds one), and 1
// after an abandon (Go: 2).
func TestServerFirstDeliveryCount(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	if err := w.sender(t, "q").SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
		t.Fatal(err)
	}
	r := w.receiver(t, "q", nil)
	m := receiveN(t, r, 1)[0]
	if m.DeliveryCount != 1 {
		t.Fatalf("Go SDK DeliveryCount on a first delivery = %d, want 1", m.DeliveryCount)
	}
	if err := r.AbandonMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}
	if m = receiveN(t, r, 1)[0]; m.DeliveryCount != 2 {
		t.Fatalf("Go SDK DeliveryCount after an abandon = %d, want 2", m.DeliveryCount)
	}
	if err := r.CompleteMessage(ctx, m, nil); err != nil {
		t.Fatal(err)
	}

	// On the wire: the first delivery's header carries delivery-count 0, explicitly.
	if err := w.sender(t, "q").SendMessage(ctx, &azservicebus.Message{Body: []byte("raw")}, nil); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	c.attachReceiver("q")
	c.flow(0, 100, 0, 1, false)
	for {
		fr := c.readFrame()
		if _, ok := fr.Body.(*amqp.Transfer); !ok {
			continue
		}
		if !headerHasDeliveryCount(fr.Payload) {
			t.Fatalf("the header of a first delivery has no delivery-count field: % x", fr.Payload[:min(len(fr.Payload), 16)])
		}
		return
	}
}

// headerHasDeliveryCount reports whether an encoded message starts with a header list of
// five fields (delivery-count is the fifth).
func headerHasDeliveryCount(b []byte) bool {
	// 00 53 70 (described header), then list8 c0 SIZE COUNT or list0 45.
	return len(b) > 5 && b[0] == 0x00 && b[1] == 0x53 && b[2] == 0x70 && b[3] == 0xc0 && b[5] == 5
}

// TestServerAssignsMessageID: a message sent without a MessageId is received with one,
// on the wire and in memory (the SDK's live test Test_Sender_MessageID: "this is filled
// in by automatically"); the JavaScript SDK cannot settle a message without one.
func TestServerAssignsMessageID(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	ctx := wireCtx(t)
	s := w.sender(t, "q")
	for range 2 {
		if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("m")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	got := receiveN(t, w.receiver(t, "q", nil), 2)
	if got[0].MessageID == "" || got[0].MessageID == got[1].MessageID {
		t.Fatalf("MessageIDs %q and %q, want two distinct non-empty ones", got[0].MessageID, got[1].MessageID)
	}

	ns := NewNamespace(nil)
	q, _ := ns.NewQueue("mem", nil)
	snd, _ := ns.NewSender("mem", nil)
	if err := snd.SendMessage(context.Background(), &azservicebus.Message{MessageID: ptr("")}, nil); err != nil {
		t.Fatal(err)
	}
	if p := q.Active(); len(p) != 1 || p[0].MessageID == "" {
		t.Fatalf("in memory: active %+v, want one message with a MessageID", p)
	}
}

// TestServerEntityURIAddress: the Python SDK attaches its sender and receiver links to
// amqps://host/entity (azure-servicebus _create_attribute: _entity_uri); the service
// takes the path after the host.
func TestServerEntityURIAddress(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil}})
	uri := "amqps://" + w.srv.Addr().String() + "/q"
	c := dialRaw(t, w.srv)
	c.open()
	c.beginSession(100)
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "s", Handle: 0, Role: amqp.RoleSender,
		Source: &amqp.Source{}, Target: &amqp.Target{Address: uri}}, nil)
	if a, ok := c.readFrame().Body.(*amqp.Attach); !ok || a.Target == nil {
		t.Fatalf("sending link to %s refused", uri)
	}
	payload, err := (&amqp.Message{Data: [][]byte{[]byte("via uri")}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	c.sendFirst(payload)
	if d := c.readDisposition(); d.State == nil {
		t.Fatalf("disposition %+v without a state", d)
	} else if _, ok := d.State.(*amqp.Accepted); !ok {
		t.Fatalf("send to %s answered %#v, want accepted", uri, d.State)
	}
	c.attachReceiver(uri + "/$DeadLetterQueue") // the sub-queue of a URI address too
	c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Detach{Handle: 1, Closed: true}, nil)
	c.readFrame()
	c.attachReceiver(uri)
	c.flow(1, 100, 0, 1, false)
	c.expectTransfers(1)

}

// TestServerSessionFilterEcho: the server's attach echoes the session filter in the form
// the client sent: a bare session id for a bare one, as the JavaScript SDK sends it and
// compares it (@azure/service-bus 7.9.5 messageSession.js createRheaLink), described for
// a described one (the Go SDK).
func TestServerSessionFilterEcho(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"s": {RequiresSession: true}}})
	for i, filter := range []any{"a", &amqp.Described{Descriptor: uint64(0x137000000C), Value: "b"}} {
		c := dialRaw(t, w.srv)
		c.open()
		c.beginSession(100)
		c.writeFrame(amqp.FrameTypeAMQP, 0, &amqp.Attach{Name: "r", Handle: 1, Role: amqp.RoleReceiver,
			RcvSettleMode: amqp.Ptr(amqp.ReceiverSettleSecond), Target: &amqp.Target{Address: "raw"},
			Source: &amqp.Source{Address: "s", Filter: amqp.Map{{Key: sessionFilterName, Value: filter}}}}, nil)
		a, ok := c.readFrame().Body.(*amqp.Attach)
		if !ok || a.Source == nil {
			t.Fatalf("filter %d: session link refused", i)
		}
		got, _ := a.Source.Filter.Get(sessionFilterName)
		switch want := filter.(type) {
		case string:
			if got != want {
				t.Errorf("bare filter %q echoed as %#v, want the bare id", want, got)
			}
		case *amqp.Described:
			d, ok := got.(*amqp.Described)
			if !ok || d.Value != want.Value || d.Descriptor != want.Descriptor {
				t.Errorf("described filter echoed as %#v, want %#v", got, want)
			}
		}
	}
}

// TestServerAdminXMLForJavaScript: the admin API's descriptions carry what the
// JavaScript admin client requires to build its objects (@azure/service-bus 7.9.5
// serializers/*ResourceSerializer.js: EnableExpress, EntityAvailabilityStatus, and
// CountDetails with one declared xmlns prefix, as the service writes it).
func TestServerAdminXMLForJavaScript(t *testing.T) {
	t.Parallel()
	w := newWire(t, &ServerOptions{Queues: map[string]*EntityOptions{"q": nil},
		Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}}})
	hc := w.srv.AdminHTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	counts := `<CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>0</d2p1:ActiveMessageCount>`
	for path, wants := range map[string][]string{
		"q":                 {"<EnableExpress>false</EnableExpress>", "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>", counts},
		"t":                 {"<EnableExpress>false</EnableExpress>", "<SupportOrdering>true</SupportOrdering>", "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>", counts},
		"t/Subscriptions/s": {"<Status>Active</Status>", "<EntityAvailabilityStatus>Available</EntityAvailabilityStatus>", "<AutoDeleteOnIdle>", "<DeadLetteringOnFilterEvaluationExceptions>", counts},
	} {
		resp, err := hc.Get("https://" + w.srv.Addr().String() + "/" + path + "?api-version=2021-05")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
		}
		for _, want := range wants {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s: description lacks %s:\n%s", path, want, body)
			}
		}
	}
}
