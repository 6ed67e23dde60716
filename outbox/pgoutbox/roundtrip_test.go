package pgoutbox_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/outbox/pgoutbox"
)

func ptr[T any](v T) *T { return &v }

// fullMessage sets every field of azservicebus.Message, with application properties of
// every type the outbox stores, edge values included.
func fullMessage() *azservicebus.Message {
	return &azservicebus.Message{
		MessageID:            ptr("order-1/shipped"),
		Body:                 []byte{0, 1, 2, 0xff, 'x'},
		ContentType:          ptr("application/json; charset=utf-8"),
		CorrelationID:        ptr("corr-7"),
		Subject:              ptr("OrderShipped"),
		SessionID:            ptr(""), // empty is a session id too
		PartitionKey:         ptr(""),
		ReplyTo:              ptr("replies"),
		ReplyToSessionID:     ptr("client-9"),
		To:                   ptr("shipping"),
		TimeToLive:           ptr(90*time.Minute + 7*time.Nanosecond),
		ScheduledEnqueueTime: ptr(time.Now().Add(time.Hour).Truncate(time.Microsecond)),
		ApplicationProperties: map[string]any{
			"nil": nil, "true": true, "false": false, "string": "héllo", "empty": "",
			"nul": "a\x00b", "invalid-utf8": "\xff\xfe", "symbol": amqp.Symbol("sym"),
			"int": int(-42), "int8": int8(math.MinInt8), "int16": int16(math.MaxInt16),
			"int32": int32(math.MinInt32), "int64": int64(math.MinInt64), "uint": uint(math.MaxUint),
			"uint8": uint8(math.MaxUint8), "uint16": uint16(math.MaxUint16), "uint32": uint32(math.MaxUint32),
			"uint64": uint64(math.MaxUint64), "float32": float32(3.1415927), "float64": math.SmallestNonzeroFloat64,
			"inf": math.Inf(-1), "negzero": math.Copysign(0, -1), "bytes": []byte{0, 0xff}, "nobytes": []byte{},
			"time": time.Date(2024, 2, 29, 23, 59, 59, 123456789, time.UTC),
			"uuid": amqp.UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8},
			"ключ": "значение",
		},
	}
}

// TestRoundTripEveryField: a message with every field set, stored by Add and sent by
// the relay, reaches the broker with every field as given (property types included).
func TestRoundTripEveryField(t *testing.T) {
	e := newEnv(t)
	q := e.queue("shipping", nil)
	want := fullMessage()
	sparse := &azservicebus.Message{MessageID: ptr("sparse")} // nil fields stay nil
	e.add("shipping", want, sparse)
	e.relay(nil)
	eventually(t, "two messages at the broker", func() bool { c := q.Counts(); return c.Scheduled+c.Active == 2 })

	got := q.Scheduled()
	if len(got) != 1 {
		t.Fatalf("%d scheduled messages, want 1", len(got))
	}
	m := got[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"MessageID", m.MessageID, *want.MessageID},
		{"Body", m.Body, want.Body},
		{"ContentType", m.ContentType, want.ContentType},
		{"CorrelationID", m.CorrelationID, want.CorrelationID},
		{"Subject", m.Subject, want.Subject},
		{"SessionID", m.SessionID, want.SessionID},
		{"PartitionKey", m.PartitionKey, want.PartitionKey},
		{"ReplyTo", m.ReplyTo, want.ReplyTo},
		{"ReplyToSessionID", m.ReplyToSessionID, want.ReplyToSessionID},
		{"To", m.To, want.To},
		{"TimeToLive", m.TimeToLive, want.TimeToLive},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, deref(c.got), deref(c.want))
		}
	}
	if m.ScheduledEnqueueTime == nil || !m.ScheduledEnqueueTime.Equal(*want.ScheduledEnqueueTime) {
		t.Errorf("ScheduledEnqueueTime = %v, want %v", m.ScheduledEnqueueTime, *want.ScheduledEnqueueTime)
	}
	if len(m.ApplicationProperties) != len(want.ApplicationProperties) {
		t.Errorf("%d application properties, want %d", len(m.ApplicationProperties), len(want.ApplicationProperties))
	}
	for k, w := range want.ApplicationProperties {
		g, ok := m.ApplicationProperties[k]
		if wt, isTime := w.(time.Time); isTime {
			if gt, ok := g.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("property %q = %#v, want %v", k, g, wt)
			}
			continue
		}
		if wb, isBytes := w.([]byte); isBytes { // sbtest, like AMQP, does not tell nil from empty
			if gb, ok := g.([]byte); !ok || !bytes.Equal(gb, wb) {
				t.Errorf("property %q = %#v, want %#v", k, g, wb)
			}
			continue
		}
		if !ok || !reflect.DeepEqual(g, w) || reflect.TypeOf(g) != reflect.TypeOf(w) {
			t.Errorf("property %q = %#v (%T), want %#v (%T)", k, g, g, w, w)
		}
	}
	if f := m.ApplicationProperties["negzero"].(float64); !math.Signbit(f) {
		t.Errorf("negative zero lost its sign")
	}

	s := q.Active()
	if len(s) != 1 || s[0].MessageID != "sparse" || s[0].ContentType != nil || s[0].SessionID != nil ||
		s[0].ApplicationProperties != nil || s[0].ScheduledEnqueueTime != nil || len(s[0].Body) != 0 {
		t.Fatalf("sparse message came back as %+v", s)
	}
}

func deref(v any) any {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

// TestAddAssignsMessageID: Add gives a message without MessageID a UUID, written to the
// caller's message and stored, so every send carries it.
func TestAddAssignsMessageID(t *testing.T) {
	e := newEnv(t)
	m := &azservicebus.Message{Body: []byte("x")}
	e.add("q", m)
	if m.MessageID == nil || len(*m.MessageID) != 36 {
		t.Fatalf("MessageID %v, want a UUID", m.MessageID)
	}
	var stored string
	if err := e.pool.QueryRow(context.Background(), `SELECT message_id FROM `+e.ob.Table()).Scan(&stored); err != nil || stored != *m.MessageID {
		t.Fatalf("stored %q (%v), want %q", stored, err, *m.MessageID)
	}
}

// TestAddRejectsBadInput: bad input gets a clear error, writes nothing and changes no
// message.
func TestAddRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ok := &azservicebus.Message{Body: []byte("fine")}
	tests := []struct {
		name string
		dest string
		msgs []*azservicebus.Message
		want error
	}{
		{"nil message", "q", []*azservicebus.Message{ok, nil}, sbkit.ErrNilMessage},
		{"empty destination", "", []*azservicebus.Message{ok}, pgoutbox.ErrInvalidMessage},
		{"time property after year 9999", "q", []*azservicebus.Message{ok, {ApplicationProperties: map[string]any{"t": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}}, pgoutbox.ErrInvalidMessage},
		{"time property before year 0", "q", []*azservicebus.Message{{ApplicationProperties: map[string]any{"t": time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}}}, pgoutbox.ErrInvalidMessage},
		{"duration property", "q", []*azservicebus.Message{ok, {ApplicationProperties: map[string]any{"d": time.Second}}}, pgoutbox.ErrInvalidMessage},
		{"map property", "q", []*azservicebus.Message{{ApplicationProperties: map[string]any{"m": map[string]any{}}}}, pgoutbox.ErrInvalidMessage},
		{"pointer property", "q", []*azservicebus.Message{{ApplicationProperties: map[string]any{"p": ptr(1)}}}, pgoutbox.ErrInvalidMessage},
		{"NUL in a session id", "q", []*azservicebus.Message{{SessionID: ptr("a\x00")}}, pgoutbox.ErrInvalidMessage},
		{"invalid UTF-8 in a property name", "q", []*azservicebus.Message{{ApplicationProperties: map[string]any{"\xff": 1}}}, pgoutbox.ErrInvalidMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error { return e.ob.Add(ctx, tx, tt.dest, tt.msgs...) })
			if !errors.Is(err, tt.want) {
				t.Fatalf("Add = %v, want %v", err, tt.want)
			}
			if ok.MessageID != nil {
				t.Fatalf("a rejected Add set MessageID %q on the caller's message", *ok.MessageID)
			}
		})
	}
	if err := e.ob.Add(ctx, nil, "q", ok); !errors.Is(err, pgoutbox.ErrNoTransaction) {
		t.Fatalf("Add(nil tx) = %v", err)
	}
	if n, _ := e.count(); n != 0 {
		t.Fatalf("%d rows after rejected Adds", n)
	}
}
