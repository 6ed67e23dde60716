package deadletter

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/sbkit/sbkit/internal/guid"
)

// Record is one message of an export: one JSON object on one line (JSON Lines). Import
// sends the fields above the reference ones; the reference fields say where the message
// was and why, and are not sent.
type Record struct {
	MessageID string `json:"messageId"`
	// Body is the message's body when it is one data section (or none), as base64.
	Body []byte `json:"body,omitempty"`
	// BodyKind is "" for such a body, or "data" (several data sections, in Data),
	// "value" (an AMQP value, in Value) or "sequence" (AMQP sequences, in Sequence), as
	// the SDK exposes them through [azservicebus.ReceivedMessage.RawAMQPMessage].
	BodyKind string    `json:"bodyKind,omitempty"`
	Data     [][]byte  `json:"data,omitempty"`
	Value    *Value    `json:"value,omitempty"`
	Sequence [][]Value `json:"sequence,omitempty"`

	ContentType      *string `json:"contentType,omitempty"`
	CorrelationID    *string `json:"correlationId,omitempty"`
	SessionID        *string `json:"sessionId,omitempty"`
	PartitionKey     *string `json:"partitionKey,omitempty"`
	Subject          *string `json:"subject,omitempty"`
	To               *string `json:"to,omitempty"`
	ReplyTo          *string `json:"replyTo,omitempty"`
	ReplyToSessionID *string `json:"replyToSessionId,omitempty"`
	// TimeToLive is a Go duration ("1h0m0s"); empty when the message had none.
	TimeToLive string `json:"timeToLive,omitempty"`
	// ApplicationProperties keep their AMQP types ([Value]).
	ApplicationProperties map[string]Value `json:"applicationProperties,omitempty"`

	// Reference fields, not sent by Import.
	SequenceNumber             *int64     `json:"sequenceNumber,omitempty"`
	EnqueuedTime               *time.Time `json:"enqueuedTime,omitempty"`
	ExpiresAt                  *time.Time `json:"expiresAt,omitempty"`
	DeliveryCount              uint32     `json:"deliveryCount,omitempty"`
	DeadLetterReason           *string    `json:"deadLetterReason,omitempty"`
	DeadLetterErrorDescription *string    `json:"deadLetterErrorDescription,omitempty"`
	DeadLetterSource           *string    `json:"deadLetterSource,omitempty"`
	State                      string     `json:"state,omitempty"`
}

// Value is an AMQP value with its type, so that a JSON round trip keeps it: Type is one
// of null, bool, string, symbol, binary (V base64), int8, int16, int32, int64, uint8,
// uint16, uint32, uint64, float32, float64 (V a number, or "NaN", "+Inf", "-Inf"), time
// (RFC 3339 with nanoseconds), uuid (canonical text), list (V a list of Values) and map
// (V a list of {"key": Value, "value": Value}).
type Value struct {
	Type string          `json:"type"`
	V    json.RawMessage `json:"value,omitempty"`
}

type mapEntry struct {
	Key   Value `json:"key"`
	Value Value `json:"value"`
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only strings, numbers, slices of Values and []byte reach here
	}
	return b
}

func floatValue(f float64, bits int) json.RawMessage {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return raw(strconv.FormatFloat(f, 'g', -1, bits))
	}
	return json.RawMessage(strconv.FormatFloat(f, 'g', -1, bits))
}

// EncodeValue returns v with its type. It fails for a type AMQP messages cannot carry
// or this package does not know.
func EncodeValue(v any) (Value, error) {
	switch x := v.(type) {
	case nil:
		return Value{Type: "null"}, nil
	case bool:
		return Value{"bool", raw(x)}, nil
	case string:
		return Value{"string", raw(x)}, nil
	case amqp.Symbol:
		return Value{"symbol", raw(string(x))}, nil
	case []byte:
		return Value{"binary", raw(x)}, nil
	case int8:
		return Value{"int8", raw(x)}, nil
	case int16:
		return Value{"int16", raw(x)}, nil
	case int32:
		return Value{"int32", raw(x)}, nil
	case int64:
		return Value{"int64", raw(x)}, nil
	case int:
		return Value{"int64", raw(x)}, nil
	case uint8:
		return Value{"uint8", raw(x)}, nil
	case uint16:
		return Value{"uint16", raw(x)}, nil
	case uint32:
		return Value{"uint32", raw(x)}, nil
	case uint64:
		return Value{"uint64", raw(x)}, nil
	case float32:
		return Value{"float32", floatValue(float64(x), 32)}, nil
	case float64:
		return Value{"float64", floatValue(x, 64)}, nil
	case time.Time:
		return Value{"time", raw(x.Format(time.RFC3339Nano))}, nil
	case amqp.UUID:
		return Value{"uuid", raw(guid.Format([16]byte(x)))}, nil
	case []any:
		out := make([]Value, len(x))
		for i, e := range x {
			ev, err := EncodeValue(e)
			if err != nil {
				return Value{}, err
			}
			out[i] = ev
		}
		return Value{"list", raw(out)}, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map {
		var out []mapEntry
		it := rv.MapRange()
		for it.Next() {
			k, err := EncodeValue(it.Key().Interface())
			if err != nil {
				return Value{}, err
			}
			e, err := EncodeValue(it.Value().Interface())
			if err != nil {
				return Value{}, err
			}
			out = append(out, mapEntry{k, e})
		}
		// A stable order, so that an export of the same message is the same line.
		sortEntries(out)
		return Value{"map", raw(out)}, nil
	}
	return Value{}, fmt.Errorf("deadletter: a value of type %T cannot be exported", v)
}

func sortEntries(es []mapEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && bytes.Compare(es[j-1].Key.V, es[j].Key.V) > 0; j-- {
			es[j-1], es[j] = es[j], es[j-1]
		}
	}
}

// Decode returns the Go value of v, of the type the SDK sends as v.Type.
func (v Value) Decode() (any, error) {
	bad := func(err error) (any, error) {
		return nil, fmt.Errorf("%w: value of type %q: %s: %w", ErrBadRecord, v.Type, v.V, err)
	}
	intOf := func(bits int) (int64, error) { return strconv.ParseInt(string(v.V), 10, bits) }
	uintOf := func(bits int) (uint64, error) { return strconv.ParseUint(string(v.V), 10, bits) }
	switch v.Type {
	case "null":
		return nil, nil
	case "bool":
		var b bool
		if err := json.Unmarshal(v.V, &b); err != nil {
			return bad(err)
		}
		return b, nil
	case "string", "symbol", "time", "uuid":
		var s string
		if err := json.Unmarshal(v.V, &s); err != nil {
			return bad(err)
		}
		switch v.Type {
		case "symbol":
			return amqp.Symbol(s), nil
		case "time":
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return bad(err)
			}
			return t, nil
		case "uuid":
			u, err := parseUUID(s)
			if err != nil {
				return bad(err)
			}
			return amqp.UUID(u), nil
		}
		return s, nil
	case "binary":
		var b []byte
		if err := json.Unmarshal(v.V, &b); err != nil {
			return bad(err)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	case "int8", "int16", "int32", "int64":
		bits, _ := strconv.Atoi(v.Type[3:])
		n, err := intOf(bits)
		if err != nil {
			return bad(err)
		}
		switch bits {
		case 8:
			return int8(n), nil
		case 16:
			return int16(n), nil
		case 32:
			return int32(n), nil
		}
		return n, nil
	case "uint8", "uint16", "uint32", "uint64":
		bits, _ := strconv.Atoi(v.Type[4:])
		n, err := uintOf(bits)
		if err != nil {
			return bad(err)
		}
		switch bits {
		case 8:
			return uint8(n), nil
		case 16:
			return uint16(n), nil
		case 32:
			return uint32(n), nil
		}
		return n, nil
	case "float32", "float64":
		bits := 64
		if v.Type == "float32" {
			bits = 32
		}
		s := string(v.V)
		if len(s) > 0 && s[0] == '"' {
			if err := json.Unmarshal(v.V, &s); err != nil {
				return bad(err)
			}
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return bad(err)
		}
		if bits == 32 {
			return float32(f), nil
		}
		return f, nil
	case "list":
		var vs []Value
		if err := json.Unmarshal(v.V, &vs); err != nil {
			return bad(err)
		}
		out := make([]any, len(vs))
		for i, e := range vs {
			d, err := e.Decode()
			if err != nil {
				return nil, err
			}
			out[i] = d
		}
		return out, nil
	case "map":
		var es []mapEntry
		if err := json.Unmarshal(v.V, &es); err != nil {
			return bad(err)
		}
		out := make(map[any]any, len(es))
		for _, e := range es {
			k, err := e.Key.Decode()
			if err != nil {
				return nil, err
			}
			d, err := e.Value.Decode()
			if err != nil {
				return nil, err
			}
			if k != nil && !reflect.TypeOf(k).Comparable() {
				return bad(fmt.Errorf("map key of type %T", k))
			}
			out[k] = d
		}
		return out, nil
	}
	return bad(fmt.Errorf("unknown type"))
}

// NewRecord returns the record of m. It fails for an application property or body
// value of a type [EncodeValue] does not know.
func NewRecord(m *azservicebus.ReceivedMessage) (*Record, error) {
	r := &Record{
		MessageID: m.MessageID, ContentType: m.ContentType, CorrelationID: m.CorrelationID, SessionID: m.SessionID,
		PartitionKey: m.PartitionKey, Subject: m.Subject, To: m.To, ReplyTo: m.ReplyTo, ReplyToSessionID: m.ReplyToSessionID,
		SequenceNumber: m.SequenceNumber, EnqueuedTime: m.EnqueuedTime, ExpiresAt: m.ExpiresAt, DeliveryCount: m.DeliveryCount,
		DeadLetterReason: m.DeadLetterReason, DeadLetterErrorDescription: m.DeadLetterErrorDescription, DeadLetterSource: m.DeadLetterSource,
	}
	switch m.State {
	case azservicebus.MessageStateDeferred:
		r.State = "deferred"
	case azservicebus.MessageStateScheduled:
		r.State = "scheduled"
	}
	if t := ttl(m.TimeToLive); t != nil {
		r.TimeToLive = t.String()
	}
	if raw := m.RawAMQPMessage; !simpleBody(raw) {
		switch {
		case raw.Body.Value != nil:
			v, err := EncodeValue(raw.Body.Value)
			if err != nil {
				return nil, fmt.Errorf("message %q body: %w", m.MessageID, err)
			}
			r.BodyKind, r.Value = "value", &v
		case raw.Body.Sequence != nil:
			r.BodyKind = "sequence"
			for _, seq := range raw.Body.Sequence {
				vs := make([]Value, len(seq))
				for i, e := range seq {
					v, err := EncodeValue(e)
					if err != nil {
						return nil, fmt.Errorf("message %q body: %w", m.MessageID, err)
					}
					vs[i] = v
				}
				r.Sequence = append(r.Sequence, vs)
			}
		default:
			r.BodyKind, r.Data = "data", raw.Body.Data
		}
	} else {
		r.Body = m.Body
	}
	if len(m.ApplicationProperties) > 0 {
		r.ApplicationProperties = make(map[string]Value, len(m.ApplicationProperties))
		for k, v := range m.ApplicationProperties {
			ev, err := EncodeValue(v)
			if err != nil {
				return nil, fmt.Errorf("message %q property %q: %w", m.MessageID, k, err)
			}
			r.ApplicationProperties[k] = ev
		}
	}
	return r, nil
}

// properties decodes the record's application properties, leaving out the dead-letter
// ones when clean is set.
func (r *Record) properties() (map[string]any, error) {
	if len(r.ApplicationProperties) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(r.ApplicationProperties))
	for k, v := range r.ApplicationProperties {
		d, err := v.Decode()
		if err != nil {
			return nil, fmt.Errorf("property %q: %w", k, err)
		}
		out[k] = d
	}
	return out, nil
}

func (r *Record) ttl() (*time.Duration, error) {
	if r.TimeToLive == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(r.TimeToLive)
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("%w: timeToLive %q", ErrBadRecord, r.TimeToLive)
	}
	return &d, nil
}

// Message returns the message Import sends for r: nil, with no error, when r's body
// needs [Record.AMQPMessage]. The application properties are r's as exported, the
// dead-letter reason and description included (Import removes them unless told to keep
// them).
func (r *Record) Message() (*azservicebus.Message, error) {
	if r.BodyKind != "" {
		return nil, nil
	}
	props, err := r.properties()
	if err != nil {
		return nil, err
	}
	t, err := r.ttl()
	if err != nil {
		return nil, err
	}
	id := r.MessageID
	body := r.Body
	if body == nil {
		body = []byte{}
	}
	return &azservicebus.Message{
		ApplicationProperties: props, Body: body, ContentType: r.ContentType, CorrelationID: r.CorrelationID,
		MessageID: &id, PartitionKey: r.PartitionKey, ReplyTo: r.ReplyTo, ReplyToSessionID: r.ReplyToSessionID,
		SessionID: r.SessionID, Subject: r.Subject, TimeToLive: t, To: r.To,
	}, nil
}

// AMQPMessage returns r as an AMQP message, for any body kind.
func (r *Record) AMQPMessage() (*azservicebus.AMQPAnnotatedMessage, error) {
	props, err := r.properties()
	if err != nil {
		return nil, err
	}
	t, err := r.ttl()
	if err != nil {
		return nil, err
	}
	am := &azservicebus.AMQPAnnotatedMessage{
		ApplicationProperties: props,
		Properties: &azservicebus.AMQPAnnotatedMessageProperties{
			MessageID: r.MessageID, ContentType: r.ContentType, GroupID: r.SessionID, Subject: r.Subject,
			To: r.To, ReplyTo: r.ReplyTo, ReplyToGroupID: r.ReplyToSessionID,
		},
	}
	if r.CorrelationID != nil {
		am.Properties.CorrelationID = *r.CorrelationID
	}
	if t != nil {
		am.Header = &azservicebus.AMQPAnnotatedMessageHeader{Durable: true, TTL: *t}
	}
	if r.PartitionKey != nil {
		am.MessageAnnotations = map[any]any{partitionKeyAnnotation: *r.PartitionKey}
	}
	switch r.BodyKind {
	case "":
		am.Body.Data = [][]byte{r.Body}
	case "data":
		am.Body.Data = r.Data
	case "value":
		if r.Value == nil {
			return nil, fmt.Errorf("%w: bodyKind value without a value", ErrBadRecord)
		}
		v, err := r.Value.Decode()
		if err != nil {
			return nil, err
		}
		am.Body.Value = v
	case "sequence":
		for _, seq := range r.Sequence {
			vs := make([]any, len(seq))
			for i, e := range seq {
				d, err := e.Decode()
				if err != nil {
					return nil, err
				}
				vs[i] = d
			}
			am.Body.Sequence = append(am.Body.Sequence, vs)
		}
	default:
		return nil, fmt.Errorf("%w: unknown bodyKind %q", ErrBadRecord, r.BodyKind)
	}
	return am, nil
}

// parseUUID parses the canonical text form of a UUID (8-4-4-4-12 hexadecimal digits),
// the form guid.Format writes.
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("not a UUID: %q", s)
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, fmt.Errorf("not a UUID: %q", s)
	}
	return u, nil
}
