package pgoutbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// ErrInvalidMessage is wrapped by Add's error for a message the outbox cannot store
// faithfully, and by the error a row is dead-lettered with when the relay cannot decode it
// (a row changed by hand): a nil message, a string field (MessageID, ContentType, CorrelationID,
// Subject, SessionID, PartitionKey, ReplyTo, ReplyToSessionID, To) or a property name
// that is not valid UTF-8 or contains a NUL byte (PostgreSQL text cannot hold it), an
// application property whose type AMQP's application-properties section cannot carry,
// or a time.Time property outside the years 0000 to 9999 (stored as RFC 3339 text).
var ErrInvalidMessage = errors.New("pgoutbox: invalid message")

// encoded is a message as the outbox table's columns hold it (see messageColumns).
type encoded struct {
	messageID                                      string
	body                                           []byte
	contentType, correlationID, subject, sessionID *string
	partitionKey, replyTo, replyToSessionID, to    *string
	ttl                                            *int64 // nanoseconds
	scheduled                                      *time.Time
	props                                          []byte // JSON; nil for no map
}

func (e *encoded) args() []any {
	var props any
	if e.props != nil {
		props = string(e.props) // text, cast to jsonb by the column
	}
	return []any{e.messageID, e.body, e.contentType, e.correlationID, e.subject, e.sessionID,
		e.partitionKey, e.replyTo, e.replyToSessionID, e.to, e.ttl, e.scheduled, props}
}

// orderKey is the ordering key of a message: its session, else its partition key; nil
// means the transaction (the insert then uses the transaction's id).
func (e *encoded) orderKey() *string {
	var k string
	switch {
	case e.sessionID != nil:
		k = "s:" + *e.sessionID
	case e.partitionKey != nil:
		k = "p:" + *e.partitionKey
	default:
		return nil
	}
	return &k
}

// encode checks m and returns its columns. m must have its MessageID.
func encode(m *azservicebus.Message) (*encoded, error) {
	e := &encoded{
		messageID: *m.MessageID, body: m.Body, contentType: m.ContentType, correlationID: m.CorrelationID,
		subject: m.Subject, sessionID: m.SessionID, partitionKey: m.PartitionKey, replyTo: m.ReplyTo,
		replyToSessionID: m.ReplyToSessionID, to: m.To, scheduled: m.ScheduledEnqueueTime,
	}
	fields := [...]struct {
		name string
		v    *string
	}{{"MessageID", m.MessageID}, {"ContentType", m.ContentType}, {"CorrelationID", m.CorrelationID},
		{"Subject", m.Subject}, {"SessionID", m.SessionID}, {"PartitionKey", m.PartitionKey},
		{"ReplyTo", m.ReplyTo}, {"ReplyToSessionID", m.ReplyToSessionID}, {"To", m.To}}
	for _, f := range fields {
		if f.v != nil && !textSafe(*f.v) {
			return nil, fmt.Errorf("%w: %s is not valid UTF-8 without NUL bytes", ErrInvalidMessage, f.name)
		}
	}
	if m.TimeToLive != nil {
		ns := int64(*m.TimeToLive)
		e.ttl = &ns
	}
	if m.ApplicationProperties != nil {
		p, err := encodeProps(m.ApplicationProperties)
		if err != nil {
			return nil, err
		}
		e.props = p
	}
	return e, nil
}

// textSafe reports whether PostgreSQL's text type holds s unchanged.
func textSafe(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// Application properties are stored as a JSON object mapping each name to a pair
// [type, value]: the Go type the SDK encodes (so that the relay sends the same AMQP type)
// and the value as a string that parses back exactly. Types are those of AMQP's simple
// types that the SDK's encoder (go-amqp) accepts as values, as the AMQP 1.0 specification
// (section 3.2.5, application-properties) restricts the section to simple types.
const (
	tNull     = "null"
	tBool     = "bool"
	tString   = "string"
	tString64 = "string64" // a string that is not valid UTF-8 or holds NUL: base64
	tSymbol   = "symbol"
	tSymbol64 = "symbol64"
	tInt      = "int"
	tInt8     = "int8"
	tInt16    = "int16"
	tInt32    = "int32"
	tInt64    = "int64"
	tUint     = "uint"
	tUint8    = "uint8"
	tUint16   = "uint16"
	tUint32   = "uint32"
	tUint64   = "uint64"
	tFloat32  = "float32"
	tFloat64  = "float64"
	tBytes    = "bytes" // base64
	tTime     = "time"  // RFC 3339 with nanoseconds, UTC
	tUUID     = "uuid"
)

func encodeProps(props map[string]any) ([]byte, error) {
	out := make(map[string][2]string, len(props))
	for k, v := range props {
		if !textSafe(k) {
			return nil, fmt.Errorf("%w: application property name %q is not valid UTF-8 without NUL bytes", ErrInvalidMessage, k)
		}
		t, s, err := encodeValue(v)
		if err != nil {
			return nil, fmt.Errorf("%w: application property %q: %w", ErrInvalidMessage, k, err)
		}
		out[k] = [2]string{t, s}
	}
	return json.Marshal(out)
}

func encodeValue(v any) (typ, val string, err error) {
	text := func(plain, b64, s string) (string, string, error) {
		if textSafe(s) {
			return plain, s, nil
		}
		return b64, base64.StdEncoding.EncodeToString([]byte(s)), nil
	}
	switch v := v.(type) {
	case nil:
		return tNull, "", nil
	case bool:
		return tBool, strconv.FormatBool(v), nil
	case string:
		return text(tString, tString64, v)
	case amqp.Symbol:
		return text(tSymbol, tSymbol64, string(v))
	case int:
		return tInt, strconv.FormatInt(int64(v), 10), nil
	case int8:
		return tInt8, strconv.FormatInt(int64(v), 10), nil
	case int16:
		return tInt16, strconv.FormatInt(int64(v), 10), nil
	case int32:
		return tInt32, strconv.FormatInt(int64(v), 10), nil
	case int64:
		return tInt64, strconv.FormatInt(v, 10), nil
	case uint:
		return tUint, strconv.FormatUint(uint64(v), 10), nil
	case uint8:
		return tUint8, strconv.FormatUint(uint64(v), 10), nil
	case uint16:
		return tUint16, strconv.FormatUint(uint64(v), 10), nil
	case uint32:
		return tUint32, strconv.FormatUint(uint64(v), 10), nil
	case uint64:
		return tUint64, strconv.FormatUint(v, 10), nil
	case float32:
		return tFloat32, strconv.FormatFloat(float64(v), 'g', -1, 32), nil
	case float64:
		return tFloat64, strconv.FormatFloat(v, 'g', -1, 64), nil
	case []byte:
		return tBytes, base64.StdEncoding.EncodeToString(v), nil
	case time.Time:
		// RFC 3339 holds the years 0000 to 9999 only: Format writes other years, but
		// Parse refuses them.
		t := v.UTC().Format(time.RFC3339Nano)
		if back, err := time.Parse(time.RFC3339Nano, t); err != nil || !back.Equal(v) {
			return "", "", fmt.Errorf("time %v is outside the years 0000 to 9999 the outbox stores", v)
		}
		return tTime, t, nil
	case amqp.UUID:
		return tUUID, v.String(), nil
	}
	return "", "", fmt.Errorf("type %T is not an AMQP simple type the SDK sends", v)
}

func decodeProps(raw []byte) (map[string]any, error) {
	if raw == nil {
		return nil, nil
	}
	var in map[string][2]string
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("pgoutbox: application_properties: %w", err)
	}
	out := make(map[string]any, len(in))
	for k, tv := range in {
		v, err := decodeValue(tv[0], tv[1])
		if err != nil {
			return nil, fmt.Errorf("pgoutbox: application property %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func decodeValue(typ, s string) (any, error) {
	signed := func(bits int) (int64, error) { return strconv.ParseInt(s, 10, bits) }
	unsigned := func(bits int) (uint64, error) { return strconv.ParseUint(s, 10, bits) }
	switch typ {
	case tNull:
		return nil, nil
	case tBool:
		return strconv.ParseBool(s)
	case tString:
		return s, nil
	case tSymbol:
		return amqp.Symbol(s), nil
	case tString64, tSymbol64:
		b, err := base64.StdEncoding.DecodeString(s)
		if typ == tSymbol64 {
			return amqp.Symbol(b), err
		}
		return string(b), err
	case tInt:
		n, err := signed(strconv.IntSize)
		return int(n), err
	case tInt8:
		n, err := signed(8)
		return int8(n), err
	case tInt16:
		n, err := signed(16)
		return int16(n), err
	case tInt32:
		n, err := signed(32)
		return int32(n), err
	case tInt64:
		return signed(64)
	case tUint:
		n, err := unsigned(strconv.IntSize)
		return uint(n), err
	case tUint8:
		n, err := unsigned(8)
		return uint8(n), err
	case tUint16:
		n, err := unsigned(16)
		return uint16(n), err
	case tUint32:
		n, err := unsigned(32)
		return uint32(n), err
	case tUint64:
		return unsigned(64)
	case tFloat32:
		f, err := strconv.ParseFloat(s, 32)
		return float32(f), err
	case tFloat64:
		return strconv.ParseFloat(s, 64)
	case tBytes:
		b, err := base64.StdEncoding.DecodeString(s)
		if b == nil {
			b = []byte{} // the SDK sends nil and empty alike: an empty binary
		}
		return b, err
	case tTime:
		return time.Parse(time.RFC3339Nano, s)
	case tUUID:
		return parseUUID(s)
	}
	return nil, fmt.Errorf("unknown type %q", typ)
}

// parseUUID parses the canonical form that amqp.UUID.String writes.
func parseUUID(s string) (amqp.UUID, error) {
	var u amqp.UUID
	h := strings.ReplaceAll(s, "-", "")
	if len(s) != 36 || len(h) != 32 {
		return u, fmt.Errorf("bad UUID %q", s)
	}
	for i := range u {
		b, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return u, fmt.Errorf("bad UUID %q", s)
		}
		u[i] = byte(b)
	}
	return u, nil
}

// row is a claimed outbox row: its message and what the relay needs to send it.
type row struct {
	id          int64
	destination string
	orderKey    string
	attempts    int // attempts before this one
	msg         *azservicebus.Message
	decodeErr   error // the row cannot be made into a message: dead-lettered

	// Set by the run that claimed the row.
	claim    *claim
	order    *order
	blocked  bool            // found by the claim, but an earlier row of its order is not the run's
	over     bool            // found by the claim, but past its bytes: left for a later claim
	size     int64           // bytes of its body and properties, as the claim counted them
	stranded bool            // locked by the claim, but an earlier row of its order could not be
	dest     *dest           // the destination's sender it was given to
	ctx      context.Context // bounds the send: the claim's, or its order's; nil: not sent
	chained  bool            // sent with other rows of its transaction
	counted  bool            // counted in its order's sending (guarded by run.lmu)
	given    bool            // counted in run.given (guarded by run.lmu)
	weight   int64           // its bytes in the sender's window, once computed (run.lmu)
}

// scanKeys reads one row of a claim: its blocked and over flags, its size, its id,
// destination, order key and attempts. Its message is read by scanMessage.
func scanKeys(rows pgx.Rows) (*row, error) {
	r := &row{}
	err := rows.Scan(&r.blocked, &r.over, &r.size, &r.id, &r.destination, &r.orderKey, &r.attempts)
	return r, err
}

// scanMessage reads the message of one row of a claim's load: its id, then
// messageColumns. It returns the id and the message, with an error wrapping
// [ErrInvalidMessage] (the row's, not the read's) when the stored row cannot be made
// into a message.
func scanMessage(rows pgx.Rows) (id int64, m *azservicebus.Message, decodeErr, err error) {
	m = &azservicebus.Message{}
	var (
		mid       string
		ttl       *int64
		scheduled pgtype.Timestamptz // infinity too, which no time.Time holds
		props     []byte
	)
	err = rows.Scan(&id, &mid, &m.Body, &m.ContentType, &m.CorrelationID, &m.Subject, &m.SessionID, &m.PartitionKey,
		&m.ReplyTo, &m.ReplyToSessionID, &m.To, &ttl, &scheduled, &props)
	if err != nil {
		return 0, nil, nil, err
	}
	m.MessageID = &mid
	if ttl != nil {
		d := time.Duration(*ttl)
		m.TimeToLive = &d
	}
	if scheduled.Valid {
		t := scheduled.Time
		m.ScheduledEnqueueTime = &t
		if scheduled.InfinityModifier != pgtype.Finite {
			decodeErr = fmt.Errorf("%w: stored row %d: scheduled_enqueue_time is infinite", ErrInvalidMessage, id)
		}
	}
	if m.ApplicationProperties, err = decodeProps(props); err != nil && decodeErr == nil {
		decodeErr = fmt.Errorf("%w: stored row %d: %w", ErrInvalidMessage, id, err)
	}
	return id, m, decodeErr, nil
}
