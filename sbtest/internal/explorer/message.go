package explorer

import (
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// messageJSON is a peeked message: every system property the SDK reports, the
// application properties with their types, and the body (base64 in JSON; the page shows
// it as JSON, text or hex by its ContentType). BodySize is the whole body's length;
// Body holds at most the requested limit of it (BodyTruncated then).
type messageJSON struct {
	SequenceNumber             int64          `json:"sequenceNumber"`
	MessageID                  string         `json:"messageId"`
	State                      string         `json:"state"`
	EnqueuedTime               *time.Time     `json:"enqueuedTime,omitempty"`
	EnqueuedSequenceNumber     *int64         `json:"enqueuedSequenceNumber,omitempty"`
	ScheduledEnqueueTime       *time.Time     `json:"scheduledEnqueueTime,omitempty"`
	ExpiresAt                  *time.Time     `json:"expiresAt,omitempty"`
	TimeToLive                 *int64         `json:"timeToLiveMs,omitempty"`
	DeliveryCount              uint32         `json:"deliveryCount"`
	LockedUntil                *time.Time     `json:"lockedUntil,omitempty"`
	ContentType                *string        `json:"contentType,omitempty"`
	CorrelationID              *string        `json:"correlationId,omitempty"`
	Subject                    *string        `json:"subject,omitempty"`
	To                         *string        `json:"to,omitempty"`
	ReplyTo                    *string        `json:"replyTo,omitempty"`
	ReplyToSessionID           *string        `json:"replyToSessionId,omitempty"`
	SessionID                  *string        `json:"sessionId,omitempty"`
	PartitionKey               *string        `json:"partitionKey,omitempty"`
	DeadLetterReason           *string        `json:"deadLetterReason,omitempty"`
	DeadLetterErrorDescription *string        `json:"deadLetterErrorDescription,omitempty"`
	DeadLetterSource           *string        `json:"deadLetterSource,omitempty"`
	Properties                 []propertyJSON `json:"properties"`
	Body                       []byte         `json:"body"`
	BodySize                   int            `json:"bodySize"`
	BodyTruncated              bool           `json:"bodyTruncated,omitempty"`
}

// propertyJSON is an application property: its name, its type as the page offers them
// (string, long, int, double, boolean, datetime, binary, or the Go type of anything
// else) and its value as text.
type propertyJSON struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Value string `json:"value"`
}

// stateName is the SDK's message state as the page shows it.
func stateName(s azservicebus.MessageState) string {
	switch s {
	case azservicebus.MessageStateDeferred:
		return "deferred"
	case azservicebus.MessageStateScheduled:
		return "scheduled"
	}
	return "active"
}

// messageOf converts a peeked message; limit bounds the body carried (negative: all).
func messageOf(m *azservicebus.ReceivedMessage, limit int) messageJSON {
	out := messageJSON{
		MessageID:                  m.MessageID,
		State:                      stateName(m.State),
		EnqueuedTime:               m.EnqueuedTime,
		EnqueuedSequenceNumber:     m.EnqueuedSequenceNumber,
		ScheduledEnqueueTime:       m.ScheduledEnqueueTime,
		ExpiresAt:                  m.ExpiresAt,
		DeliveryCount:              m.DeliveryCount,
		LockedUntil:                m.LockedUntil,
		ContentType:                m.ContentType,
		CorrelationID:              m.CorrelationID,
		Subject:                    m.Subject,
		To:                         m.To,
		ReplyTo:                    m.ReplyTo,
		ReplyToSessionID:           m.ReplyToSessionID,
		SessionID:                  m.SessionID,
		PartitionKey:               m.PartitionKey,
		DeadLetterReason:           m.DeadLetterReason,
		DeadLetterErrorDescription: m.DeadLetterErrorDescription,
		DeadLetterSource:           m.DeadLetterSource,
		Properties:                 []propertyJSON{},
		Body:                       m.Body,
		BodySize:                   len(m.Body),
	}
	if m.SequenceNumber != nil {
		out.SequenceNumber = *m.SequenceNumber
	}
	if m.TimeToLive != nil {
		out.TimeToLive = ptr(m.TimeToLive.Milliseconds())
	}
	if limit >= 0 && len(out.Body) > limit {
		out.Body, out.BodyTruncated = out.Body[:limit], true
	}
	if out.Body == nil {
		out.Body = []byte{}
	}
	for name, v := range m.ApplicationProperties {
		out.Properties = append(out.Properties, propertyOf(name, v))
	}
	slices.SortFunc(out.Properties, func(a, b propertyJSON) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// propertyOf names the type of an application property's value, as AMQP types map to
// Go's in go-amqp (AMQP 1.0 part 1, "Types").
func propertyOf(name string, v any) propertyJSON {
	p := propertyJSON{Name: name}
	switch x := v.(type) {
	case string:
		p.Type, p.Value = "string", x
	case bool:
		p.Type, p.Value = "boolean", strconv.FormatBool(x)
	case int64:
		p.Type, p.Value = "long", strconv.FormatInt(x, 10)
	case int32:
		p.Type, p.Value = "int", strconv.FormatInt(int64(x), 10)
	case int:
		p.Type, p.Value = "long", strconv.Itoa(x)
	case float64:
		p.Type, p.Value = "double", strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		p.Type, p.Value = "float", strconv.FormatFloat(float64(x), 'g', -1, 32)
	case time.Time:
		p.Type, p.Value = "datetime", x.UTC().Format(time.RFC3339Nano)
	case []byte:
		p.Type, p.Value = "binary", fmt.Sprintf("%x", x)
	case nil:
		p.Type, p.Value = "null", ""
	default:
		p.Type, p.Value = fmt.Sprintf("%T", v), fmt.Sprint(v)
	}
	return p
}

// sendJSON is the send action's request: a message for the queue or topic at Path.
// Body is text, or base64 when BodyBase64; TimeToLive and ScheduledEnqueueTime are
// optional (RFC 3339 for the time).
type sendJSON struct {
	Path                 string         `json:"path"`
	Body                 string         `json:"body"`
	BodyBase64           bool           `json:"bodyBase64"`
	ContentType          string         `json:"contentType"`
	MessageID            string         `json:"messageId"`
	CorrelationID        string         `json:"correlationId"`
	Subject              string         `json:"subject"`
	To                   string         `json:"to"`
	ReplyTo              string         `json:"replyTo"`
	ReplyToSessionID     string         `json:"replyToSessionId"`
	SessionID            string         `json:"sessionId"`
	PartitionKey         string         `json:"partitionKey"`
	TimeToLiveMs         int64          `json:"timeToLiveMs"`
	ScheduledEnqueueTime string         `json:"scheduledEnqueueTime"`
	Properties           []propertyJSON `json:"properties"`
	Count                int            `json:"count"`
}

// maxSendCount bounds how many copies one send action sends.
const maxSendCount = 1000

// optional returns a pointer to s, or nil for "".
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// propertyValue parses an application property of the page's types.
func propertyValue(p propertyJSON) (any, error) {
	switch strings.ToLower(p.Type) {
	case "", "string":
		return p.Value, nil
	case "long":
		return strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
	case "int":
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 32)
		return int32(n), err
	case "double":
		f, err := strconv.ParseFloat(strings.TrimSpace(p.Value), 64)
		if err == nil && (math.IsInf(f, 0) || math.IsNaN(f)) {
			err = fmt.Errorf("not a finite number")
		}
		return f, err
	case "boolean":
		return strconv.ParseBool(strings.TrimSpace(p.Value))
	case "datetime":
		return time.Parse(time.RFC3339Nano, strings.TrimSpace(p.Value))
	}
	return nil, fmt.Errorf("unknown type %q (string, long, int, double, boolean, datetime)", p.Type)
}

// message builds the SDK message req asks for, and the scheduled enqueue time (zero for
// none).
func (req *sendJSON) message() (*azservicebus.Message, time.Time, error) {
	m := &azservicebus.Message{
		ContentType:      optional(req.ContentType),
		CorrelationID:    optional(req.CorrelationID),
		MessageID:        optional(req.MessageID),
		Subject:          optional(req.Subject),
		To:               optional(req.To),
		ReplyTo:          optional(req.ReplyTo),
		ReplyToSessionID: optional(req.ReplyToSessionID),
		SessionID:        optional(req.SessionID),
		PartitionKey:     optional(req.PartitionKey),
		Body:             []byte(req.Body),
	}
	if req.BodyBase64 {
		b, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return nil, time.Time{}, badRequest("body is not base64: " + err.Error())
		}
		m.Body = b
	}
	if req.TimeToLiveMs < 0 {
		return nil, time.Time{}, badRequest("timeToLiveMs must not be negative")
	}
	if req.TimeToLiveMs > 0 {
		m.TimeToLive = ptr(time.Duration(req.TimeToLiveMs) * time.Millisecond)
	}
	if len(req.Properties) > 0 {
		m.ApplicationProperties = make(map[string]any, len(req.Properties))
		for _, p := range req.Properties {
			if p.Name == "" {
				return nil, time.Time{}, badRequest("an application property has no name")
			}
			if _, dup := m.ApplicationProperties[p.Name]; dup {
				return nil, time.Time{}, badRequest("application property " + strconv.Quote(p.Name) + " is given twice")
			}
			v, err := propertyValue(p)
			if err != nil {
				return nil, time.Time{}, badRequest("application property " + strconv.Quote(p.Name) + ": " + err.Error())
			}
			m.ApplicationProperties[p.Name] = v
		}
	}
	var at time.Time
	if req.ScheduledEnqueueTime != "" {
		t, err := time.Parse(time.RFC3339Nano, req.ScheduledEnqueueTime)
		if err != nil {
			return nil, time.Time{}, badRequest("scheduledEnqueueTime is not an RFC 3339 time: " + err.Error())
		}
		at = t
	}
	return m, at, nil
}
