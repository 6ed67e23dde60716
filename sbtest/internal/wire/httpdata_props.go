package wire

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// How the runtime REST API (httpdata.go) writes a message in HTTP: its broker
// properties as the BrokerProperties JSON header, its application properties as headers,
// a batch as JSON, lock tokens as GUIDs ("Message headers and properties",
// learn.microsoft.com/rest/api/servicebus/message-headers-and-properties). The JSON
// documents' Go fields are prefixed with J, apart from the SDK's message fields of the
// same names.

// batchEntry is one message of Send Message Batch's JSON body ("Send Message Batch":
// Body, BrokerProperties and UserProperties).
type batchEntry struct {
	JBody             *string        `json:"Body"`
	JBrokerProperties *brokerIn      `json:"BrokerProperties"`
	JUserProperties   map[string]any `json:"UserProperties"`
}

func decodeBatch(body []byte) ([]*azservicebus.Message, error) {
	var entries []batchEntry
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(&entries); err != nil {
		return nil, dataErr(http.StatusBadRequest, "The batch is not a JSON array of messages: %v", err)
	}
	if len(entries) == 0 {
		return nil, dataErr(http.StatusBadRequest, "The batch holds no message.")
	}
	msgs := make([]*azservicebus.Message, len(entries))
	for i, e := range entries {
		m := &azservicebus.Message{}
		if e.JBody != nil {
			m.Body = []byte(*e.JBody)
		}
		if e.JBrokerProperties != nil {
			if err := e.JBrokerProperties.apply(m); err != nil {
				return nil, err
			}
		}
		if len(e.JUserProperties) > 0 {
			m.ApplicationProperties = make(map[string]any, len(e.JUserProperties))
			for k, v := range e.JUserProperties {
				pv, err := jsonProperty(v)
				if err != nil {
					return nil, dataErr(http.StatusBadRequest, "UserProperties[%q]: %v", k, err)
				}
				m.ApplicationProperties[k] = pv
			}
		}
		msgs[i] = m
	}
	return msgs, nil
}

// jsonProperty converts a decoded JSON value (with UseNumber) to an application
// property's: string, bool, int64 or float64; objects, arrays and null are refused.
func jsonProperty(v any) (any, error) {
	switch v := v.(type) {
	case string, bool:
		return v, nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		return v.Float64()
	}
	return nil, fmt.Errorf("a property is a string, number or boolean, not %T", v)
}

// brokerIn is the BrokerProperties a sender may set ("Message headers and properties":
// the properties can appear in any order, others are ignored). TimeToLive is in
// seconds; a batch's TimeToLiveTimeSpan is a .NET TimeSpan ("0.00:00:40", Send Message
// Batch's example); dates are RFC 1123.
type brokerIn struct {
	JCorrelationID           *string  `json:"CorrelationId"`
	JLabel                   *string  `json:"Label"`
	JMessageID               *string  `json:"MessageId"`
	JPartitionKey            *string  `json:"PartitionKey"`
	JReplyTo                 *string  `json:"ReplyTo"`
	JReplyToSessionID        *string  `json:"ReplyToSessionId"`
	JScheduledEnqueueTimeUtc *string  `json:"ScheduledEnqueueTimeUtc"`
	JSessionID               *string  `json:"SessionId"`
	JTimeToLive              *float64 `json:"TimeToLive"`
	JTimeToLiveTimeSpan      *string  `json:"TimeToLiveTimeSpan"`
	JTo                      *string  `json:"To"`
}

// apply sets what b names on m, or returns a 400 for a value out of range.
func (b *brokerIn) apply(m *azservicebus.Message) error {
	m.CorrelationID, m.Subject, m.PartitionKey = b.JCorrelationID, b.JLabel, b.JPartitionKey
	m.ReplyTo, m.ReplyToSessionID, m.SessionID, m.To = b.JReplyTo, b.JReplyToSessionID, b.JSessionID, b.JTo
	if b.JMessageID != nil {
		m.MessageID = b.JMessageID
	}
	if b.JSessionID != nil && b.JPartitionKey != nil && *b.JSessionID != *b.JPartitionKey {
		// "If the SessionId and PartitionKey properties are both set, they must be set to
		// the same value." (Message headers and properties)
		return dataErr(http.StatusBadRequest, "SessionId %q and PartitionKey %q differ.", *b.JSessionID, *b.JPartitionKey)
	}
	switch {
	case b.JTimeToLive != nil:
		if *b.JTimeToLive <= 0 || *b.JTimeToLive > float64(maxTTLSeconds) {
			return dataErr(http.StatusBadRequest, "TimeToLive %v is not a positive number of seconds.", *b.JTimeToLive)
		}
		ttl := time.Duration(*b.JTimeToLive * float64(time.Second))
		m.TimeToLive = &ttl
	case b.JTimeToLiveTimeSpan != nil:
		ttl, err := parseTimeSpan(*b.JTimeToLiveTimeSpan)
		if err != nil || ttl <= 0 {
			return dataErr(http.StatusBadRequest, "TimeToLiveTimeSpan %q is not a positive [d.]hh:mm:ss[.fff] time span.", *b.JTimeToLiveTimeSpan)
		}
		m.TimeToLive = &ttl
	}
	if b.JScheduledEnqueueTimeUtc != nil {
		t, err := http.ParseTime(*b.JScheduledEnqueueTimeUtc)
		if err != nil {
			return dataErr(http.StatusBadRequest, "ScheduledEnqueueTimeUtc %q is not an RFC 1123 date.", *b.JScheduledEnqueueTimeUtc)
		}
		m.ScheduledEnqueueTime = &t
	}
	return nil
}

// maxTimeSpanSeconds is .NET's TimeSpan.MaxValue in seconds, the time-to-live the
// service reports for a message without one (atom.MaxTimeSpan).
const maxTimeSpanSeconds = 922337203685.4775807

// maxTTLSeconds bounds a TimeToLive in seconds to what a time.Duration holds.
const maxTTLSeconds = int64(1<<63-1) / int64(time.Second)

// parseTimeSpan parses a .NET TimeSpan, [-][d.]hh:mm:ss[.fffffff].
func parseTimeSpan(s string) (time.Duration, error) {
	var days int64
	if dot, colon := strings.IndexByte(s, '.'), strings.IndexByte(s, ':'); dot >= 0 && dot < colon {
		d, err := strconv.ParseInt(s[:dot], 10, 32)
		if err != nil {
			return 0, err
		}
		days, s = d, s[dot+1:]
	}
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, fmt.Errorf("not hh:mm:ss")
	}
	h, err1 := strconv.ParseUint(parts[0], 10, 8)
	mi, err2 := strconv.ParseUint(parts[1], 10, 8)
	sec, err3 := strconv.ParseFloat(parts[2], 64)
	if err := errors.Join(err1, err2, err3); err != nil || h > 23 || mi > 59 || sec < 0 || sec >= 60 || days < 0 || days > 100000 {
		return 0, fmt.Errorf("out of range")
	}
	return time.Duration(days)*24*time.Hour + time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec*float64(time.Second)), nil
}

// notProperties are the request headers that are HTTP's or the API's own, not custom
// properties of the message (Send Message: "In addition to the listed properties, the
// header can contain custom properties").
var notProperties = map[string]bool{
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true, "Authorization": true,
	"Brokerproperties": true, "Cache-Control": true, "Connection": true, "Content-Length": true,
	"Content-Type": true, "Content-Encoding": true, "Cookie": true, "Date": true, "Expect": true,
	"Host": true, "Keep-Alive": true, "Origin": true, "Pragma": true, "Referer": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "User-Agent": true,
	"Via": true,
}

// headerProperties returns the custom properties among h's headers: a quoted value is a
// string, true and false are booleans, a number is an int64 or a float64, anything else
// a string as it is (Message headers and properties: custom properties are headers whose
// values are JSON-like literals). Header names arrive in Go's canonical form
// ("Orderid" for "orderId"): net/http keeps no other.
func headerProperties(h http.Header) map[string]any {
	var props map[string]any
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if notProperties[ck] || strings.HasPrefix(ck, "X-Ms-") || strings.HasPrefix(ck, "Sec-") || strings.HasPrefix(ck, "Proxy-") || len(vs) == 0 {
			continue
		}
		if props == nil {
			props = make(map[string]any)
		}
		props[k] = headerValue(vs[0])
	}
	return props
}

func headerValue(v string) any {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		var s string
		if json.Unmarshal([]byte(v), &s) == nil {
			return s
		}
		return v[1 : len(v)-1]
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && strings.ContainsAny(v, ".eE") {
		return f
	}
	return v
}

// brokerProps is the BrokerProperties header of a received message ("Message headers
// and properties"; dates in RFC 1123, TimeToLive in seconds).
type brokerProps struct {
	JCorrelationID           string   `json:"CorrelationId,omitempty"`
	JDeadLetterSource        string   `json:"DeadLetterSource,omitempty"`
	JDeliveryCount           uint32   `json:"DeliveryCount"`
	JEnqueuedSequenceNumber  int64    `json:"EnqueuedSequenceNumber,omitempty"`
	JEnqueuedTimeUtc         string   `json:"EnqueuedTimeUtc,omitempty"`
	JLabel                   string   `json:"Label,omitempty"`
	JLockToken               string   `json:"LockToken,omitempty"`
	JLockedUntilUtc          string   `json:"LockedUntilUtc,omitempty"`
	JMessageID               string   `json:"MessageId"`
	JPartitionKey            string   `json:"PartitionKey,omitempty"`
	JReplyTo                 string   `json:"ReplyTo,omitempty"`
	JReplyToSessionID        string   `json:"ReplyToSessionId,omitempty"`
	JScheduledEnqueueTimeUtc string   `json:"ScheduledEnqueueTimeUtc,omitempty"`
	JSequenceNumber          int64    `json:"SequenceNumber"`
	JSessionID               string   `json:"SessionId,omitempty"`
	JState                   string   `json:"State"`
	JTimeToLive              *float64 `json:"TimeToLive,omitempty"`
	JTo                      string   `json:"To,omitempty"`
	JDeadLetterReason        string   `json:"DeadLetterReason,omitempty"`
	JDeadLetterErrorDesc     string   `json:"DeadLetterErrorDescription,omitempty"`
}

func brokerOut(m *azservicebus.ReceivedMessage, lock bool) brokerProps {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	date := func(t *time.Time) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return t.UTC().Format(http.TimeFormat)
	}
	b := brokerProps{
		JCorrelationID:           str(m.CorrelationID),
		JDeadLetterSource:        str(m.DeadLetterSource),
		JDeliveryCount:           m.DeliveryCount,
		JEnqueuedTimeUtc:         date(m.EnqueuedTime),
		JLabel:                   str(m.Subject),
		JMessageID:               m.MessageID,
		JPartitionKey:            str(m.PartitionKey),
		JReplyTo:                 str(m.ReplyTo),
		JReplyToSessionID:        str(m.ReplyToSessionID),
		JScheduledEnqueueTimeUtc: date(m.ScheduledEnqueueTime),
		JSessionID:               str(m.SessionID),
		JState:                   messageStateName(m.State),
		JTo:                      str(m.To),
		JDeadLetterReason:        str(m.DeadLetterReason),
		JDeadLetterErrorDesc:     str(m.DeadLetterErrorDescription),
	}
	if m.SequenceNumber != nil {
		b.JSequenceNumber = *m.SequenceNumber
	}
	if m.EnqueuedSequenceNumber != nil {
		b.JEnqueuedSequenceNumber = *m.EnqueuedSequenceNumber
	}
	if m.TimeToLive != nil && *m.TimeToLive > 0 {
		ttl := m.TimeToLive.Seconds()
		if *m.TimeToLive == time.Duration(math.MaxInt64) {
			ttl = maxTimeSpanSeconds // no time-to-live: the service reports TimeSpan.MaxValue
		}
		b.JTimeToLive = &ttl
	}
	if lock {
		b.JLockToken = formatLockToken(m.LockToken)
		b.JLockedUntilUtc = date(m.LockedUntil)
	}
	return b
}

// messageStateName is the State broker property's value for s.
func messageStateName(s azservicebus.MessageState) string {
	switch s {
	case azservicebus.MessageStateDeferred:
		return "Deferred"
	case azservicebus.MessageStateScheduled:
		return "Scheduled"
	}
	return "Active"
}

// setPropertyHeaders writes props as headers, their names as they are: strings quoted
// (JSON), numbers and booleans bare, times as quoted RFC 1123 dates (Message headers and
// properties). A name that is not an HTTP token, or is one of the response's own
// headers, is left out.
func setPropertyHeaders(h http.Header, props map[string]any) {
	for k, v := range props {
		ck := http.CanonicalHeaderKey(k)
		if !isToken(k) || ck == "Brokerproperties" || ck == "Location" || ck == "Content-Type" || ck == "Content-Length" || ck == "Date" {
			continue
		}
		var s string
		switch v := v.(type) {
		case string:
			b, _ := json.Marshal(v)
			s = string(b)
		case time.Time:
			s = `"` + v.UTC().Format(http.TimeFormat) + `"`
		case bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
			s = fmt.Sprint(v)
		default:
			b, err := json.Marshal(fmt.Sprint(v))
			if err != nil {
				continue
			}
			s = string(b)
		}
		h[k] = []string{s}
	}
}

// isToken reports whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// formatLockToken writes a lock token (the AMQP delivery tag's 16 bytes, in .NET's
// Guid.ToByteArray order) as the GUID the service and the .NET and JavaScript SDKs
// show: the first three groups byte-reversed.
func formatLockToken(t [16]byte) string {
	b := [16]byte{t[3], t[2], t[1], t[0], t[5], t[4], t[7], t[6], t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15]}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// parseLockToken reads formatLockToken's GUID back.
func parseLockToken(s string) ([16]byte, bool) {
	var t [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return t, false
	}
	b, err := hex.DecodeString(s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:])
	if err != nil {
		return t, false
	}
	return [16]byte{b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]}, true
}
