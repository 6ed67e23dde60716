package scenario

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/receiver"
	"github.com/sbkit/sbkit/serialize"
)

// order is the typed payload of the serialize scenarios.
type order struct {
	ID    string            `json:"id"`
	Qty   int               `json:"qty"`
	Price float64           `json:"price"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
}

// orders collects what a typed handler decoded, by MessageID.
type orders struct {
	mu  sync.Mutex
	got map[string][]order
}

func (o *orders) handler(reg *serialize.Registry) func(context.Context, order, *azservicebus.ReceivedMessage) error {
	return func(_ context.Context, v order, m *azservicebus.ReceivedMessage) error {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.got == nil {
			o.got = map[string][]order{}
		}
		o.got[m.MessageID] = append(o.got[m.MessageID], v)
		return nil
	}
}

func (o *orders) snapshot() map[string][]order {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]order{}
	for k, v := range o.got {
		out[k] = append([]order(nil), v...)
	}
	return out
}

// encodeOrder encodes v with reg under the given MessageID.
func encodeOrder(t *testing.T, reg *serialize.Registry, id string, v order) *azservicebus.Message {
	t.Helper()
	m, err := reg.Encode(v, "application/json; charset=utf-8", nil)
	if err != nil {
		t.Fatal(err)
	}
	m.MessageID = &id
	return m
}

// serializeTypedJSON: typed JSON payloads encoded by the registry reach a typed handler
// decoded as sent.
func serializeTypedJSON(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	reg, err := serialize.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]order{
		"o1": {ID: "o1", Qty: 3, Price: 9.5, Tags: []string{"a", "ü"}, Meta: map[string]string{"k": "v"}},
		"o2": {ID: "o2", Qty: 1, Price: 0.25},
	}
	s := q.NewSender(t)
	for _, id := range []string{"o1", "o2"} {
		sendAll(t, s, encodeOrder(t, reg, id, sent[id]))
	}
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	got := &orders{}
	pr := startProcessor(t, r, typedHandler(t, reg, got.handler(reg)), receiver.Options{})
	waitFor(t, "both orders completed", func() bool { return pr.p.Stats().Completed == 2 })
	st := pr.stop(t, waitTimeout)
	for id, want := range sent {
		if g := got.snapshot()[id]; len(g) != 1 || !reflect.DeepEqual(g[0], want) {
			t.Errorf("%s decoded as %+v, want [%+v]", id, g, want)
		}
	}
	if st.Received != 2 || st.Completed != 2 || st.DeadLettered != 0 {
		t.Errorf("stats %+v, want 2 received and completed", st)
	}
	expectEmpty(t, q, r)
}

// serializeUndecodable: a body no decoder can read is dead-lettered on its first delivery
// with reason DeserializationFailed and a description naming the attempt; the typed
// handler never sees it, and a good message next to it is processed.
func serializeUndecodable(t *testing.T, b Backend) {
	q := b.Queue(t, QueueOptions{})
	reg, err := serialize.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := message("bad", `{"id": "o3", "qty": `)
	ct := "application/json"
	bad.ContentType = &ct
	sendAll(t, q.NewSender(t), bad, encodeOrder(t, reg, "good", order{ID: "good", Qty: 2}))
	r := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, false)
	got := &orders{}
	pr := startProcessor(t, r, typedHandler(t, reg, got.handler(reg)), receiver.Options{})
	waitFor(t, "both messages settled", func() bool {
		st := pr.p.Stats()
		return st.Completed == 1 && st.DeadLettered == 1
	})
	st := pr.stop(t, waitTimeout)
	if g := got.snapshot(); len(g) != 1 || len(g["good"]) != 1 {
		t.Errorf("typed handler saw %v, want only the good order", g)
	}
	if st.Received != 2 || st.Abandoned != 0 {
		t.Errorf("stats %+v, want 2 received, nothing abandoned (no retries)", st)
	}
	dlq := q.NewReceiver(t, azservicebus.ReceiveModePeekLock, true)
	m := receiveN(t, dlq, 1)[0]
	if m.MessageID != "bad" || deref(m.DeadLetterReason) != serialize.DefaultDeadLetterReason {
		t.Errorf("dead-lettered %q with reason %v, want bad, %s", m.MessageID, deref(m.DeadLetterReason), serialize.DefaultDeadLetterReason)
	}
	if d := deref(m.DeadLetterErrorDescription); d == nil || !strings.Contains(d.(string), "json") {
		t.Errorf("dead-letter description %v, want one naming the json attempt", d)
	}
	completeAll(t, dlq, []*azservicebus.ReceivedMessage{m})
	expectEmpty(t, q, r)
}

func typedHandler(t *testing.T, reg *serialize.Registry, fn func(context.Context, order, *azservicebus.ReceivedMessage) error) sbkit.Handler {
	t.Helper()
	h, err := serialize.Handler(reg, fn, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
