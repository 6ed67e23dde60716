package wire

import (
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// Message annotations and properties Service Bus uses, with the types the SDK expects.
const (
	annSequenceNumber   amqp.Symbol = "x-opt-sequence-number"         // long
	annEnqueuedTime     amqp.Symbol = "x-opt-enqueued-time"           // timestamp
	annLockedUntil      amqp.Symbol = "x-opt-locked-until"            // timestamp
	annMessageState     amqp.Symbol = "x-opt-message-state"           // int: 0 active, 1 deferred, 2 scheduled
	annScheduledEnqueue amqp.Symbol = "x-opt-scheduled-enqueue-time"  // timestamp
	annPartitionKey     amqp.Symbol = "x-opt-partition-key"           // string
	annDeadLetterSource amqp.Symbol = "x-opt-deadletter-source"       // string
	annEnqueuedSeq      amqp.Symbol = "x-opt-enqueue-sequence-number" // long (auto-forwarded messages)
	annLockToken        amqp.Symbol = "x-opt-lock-token"              // uuid (delivery annotation)
	propDLReason                    = "DeadLetterReason"
	propDLDescription               = "DeadLetterErrorDescription"
)

// brokerAnnotations are the message annotations the broker reads into the message (the
// partition key, the schedule) or sets itself, ignoring what a client sent ("AMQP 1.0 in
// Azure Service Bus and Event Hubs protocol guide", message annotations). A client's
// other annotations, x-opt-* ones included, are kept (SDK live test
// TestSender_SendAMQPMessageWithMultipleByteSlicesInData).
var brokerAnnotations = map[string]bool{
	string(annSequenceNumber): true, string(annEnqueuedTime): true, string(annLockedUntil): true,
	string(annMessageState): true, string(annScheduledEnqueue): true, string(annPartitionKey): true,
	string(annDeadLetterSource): true, string(annEnqueuedSeq): true, "x-opt-offset": true,
}

// noExpiry is the absolute-expiry-time of a message without a time-to-live: the
// service's, .NET's DateTimeOffset.MaxValue (the .NET SDK's ServiceBusReceivedMessage
// ExpiresAt for the default TimeToLive, TimeSpan.MaxValue), to the millisecond an AMQP
// timestamp carries.
var noExpiry = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)

// mapGet looks a key up as a string or a symbol: Service Bus peers are not consistent
// about which one they use in maps with textual keys.
func mapGet(m amqp.Map, key string) (any, bool) {
	if v, ok := m.Get(key); ok {
		return v, true
	}
	return m.Get(amqp.Symbol(key))
}

// keyString returns a textual map key as a string.
func keyString(k any) (string, bool) {
	switch k := k.(type) {
	case string:
		return k, true
	case amqp.Symbol:
		return string(k), true
	}
	return "", false
}

// idString renders a message-id or correlation-id, which AMQP allows to be a string, a
// uuid, a ulong or a binary; the entity model keeps strings.
func idString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case amqp.UUID:
		return v.String(), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case []byte:
		return hex.EncodeToString(v), true
	}
	return "", false
}

func symbolToString(s *amqp.Symbol) *string {
	if s == nil {
		return nil
	}
	v := string(*s)
	return &v
}

// toSDKMessage converts a message a client sent into the SDK's outgoing form, the way
// the service reads it: properties, application properties, the header's ttl, the
// partition key and scheduled enqueue time annotations, and the data body (data sections
// joined). What the Message cannot carry (a value or sequence body, several data
// sections, other annotations, the footer, the priority) is returned as raw sections.
func toSDKMessage(m *amqp.Message) (*azservicebus.Message, RawAMQP) {
	out := &azservicebus.Message{}
	switch len(m.Data) {
	case 0:
	case 1:
		out.Body = m.Data[0]
	default:
		out.Body = slices.Concat(m.Data...)
	}
	if h := m.Header; h != nil && h.TTL != nil {
		ttl := time.Duration(*h.TTL) * time.Millisecond
		out.TimeToLive = &ttl
	}
	if p := m.Properties; p != nil {
		if id, ok := idString(p.MessageID); ok {
			out.MessageID = &id
		}
		if id, ok := idString(p.CorrelationID); ok {
			out.CorrelationID = &id
		}
		out.ContentType = symbolToString(p.ContentType)
		out.Subject = p.Subject
		out.To = p.To
		out.ReplyTo = p.ReplyTo
		out.SessionID = p.GroupID
		out.ReplyToSessionID = p.ReplyToGroupID
	}
	if len(m.ApplicationProperties) > 0 {
		out.ApplicationProperties = make(map[string]any, len(m.ApplicationProperties))
		for _, e := range m.ApplicationProperties {
			if k, ok := keyString(e.Key); ok {
				out.ApplicationProperties[k] = e.Value
			}
		}
	}
	if v, ok := mapGet(m.MessageAnnotations, string(annPartitionKey)); ok {
		if s, ok := v.(string); ok {
			out.PartitionKey = &s
		}
	}
	if v, ok := mapGet(m.MessageAnnotations, string(annScheduledEnqueue)); ok {
		if t, ok := v.(time.Time); ok {
			out.ScheduledEnqueueTime = &t
		}
	}
	return out, rawOf(m).keep()
}

// wireValue converts an application property value of the entity model into a value the
// AMQP encoder accepts: Go's int and uint have no AMQP type and become long and ulong;
// values with no AMQP mapping at all become their fmt rendering.
func wireValue(v any) any {
	switch v := v.(type) {
	case nil, bool, uint8, uint16, uint32, uint64, int8, int16, int32, int64, float32, float64,
		string, []byte, time.Time, amqp.Symbol, amqp.UUID, amqp.Char, amqp.Decimal32, amqp.Decimal64,
		amqp.Decimal128, amqp.Map, amqp.Array, []any, *amqp.Described:
		return v // AMQP types, as decoded from what a client sent
	case int:
		return int64(v)
	case uint:
		return uint64(v)
	case time.Duration:
		return int64(v)
	}
	return fmt.Sprint(v)
}

// ttlMillis returns the header ttl for a time-to-live, and false when it cannot be sent:
// the ttl field is a uint of milliseconds, and the service omits it for the "no TTL"
// default.
func ttlMillis(ttl time.Duration) (uint32, bool) {
	ms := ttl.Milliseconds()
	if ttl <= 0 || ms > math.MaxUint32 {
		return 0, false
	}
	return uint32(ms), true
}

// fromReceived converts a message of the entity model into the AMQP message the service
// delivers: header (delivery-count is the number of earlier deliveries, ttl when it fits,
// no first-acquirer: the SDK live test TestSender_SendAMQPMessageWithMultipleByteSlicesInData
// receives a header with only what it sent), properties, application properties with the
// dead-letter reason and description, and the x-opt-* annotations, x-opt-message-state only
// for a deferred or scheduled message (the same live test). withLockToken adds the lock
// token as the x-opt-lock-token delivery annotation, as the service sends it with a
// peek-lock delivery (the same live test) and in $management responses.
func fromReceived(rm *azservicebus.ReceivedMessage, withLockToken bool) *amqp.Message {
	m := &amqp.Message{Header: &amqp.Header{Durable: true}}
	if rm.DeliveryCount > 0 {
		m.Header.DeliveryCount = rm.DeliveryCount - 1
	}
	if rm.TimeToLive != nil {
		if ms, ok := ttlMillis(*rm.TimeToLive); ok {
			m.Header.TTL = &ms
		}
	}
	p := &amqp.Properties{
		Subject:        rm.Subject,
		To:             rm.To,
		ReplyTo:        rm.ReplyTo,
		GroupID:        rm.SessionID,
		ReplyToGroupID: rm.ReplyToSessionID,
	}
	if rm.MessageID != "" {
		p.MessageID = rm.MessageID
	}
	if rm.CorrelationID != nil {
		p.CorrelationID = *rm.CorrelationID
	}
	if rm.ContentType != nil {
		p.ContentType = amqp.Ptr(amqp.Symbol(*rm.ContentType))
	}
	if rm.EnqueuedTime != nil && rm.ExpiresAt != nil {
		// As the service does, whatever the client sent: the JavaScript SDK derives the TTL
		// from these (@azure/core-amqp AmqpAnnotatedMessage.fromRheaMessage:
		// absolute-expiry-time minus creation-time).
		p.CreationTime = amqp.Ptr(rm.EnqueuedTime.UTC())
		exp := rm.ExpiresAt.UTC()
		if rm.TimeToLive == nil || *rm.TimeToLive >= sbkit.MaxTTL || exp.After(noExpiry) {
			exp = noExpiry
		}
		p.AbsoluteExpiryTime = &exp
	}
	m.Properties = p

	keys := make([]string, 0, len(rm.ApplicationProperties))
	for k := range rm.ApplicationProperties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m.ApplicationProperties = append(m.ApplicationProperties, amqp.MapEntry{Key: k, Value: wireValue(rm.ApplicationProperties[k])})
	}
	if rm.DeadLetterReason != nil {
		m.ApplicationProperties = m.ApplicationProperties.Set(propDLReason, *rm.DeadLetterReason)
	}
	if rm.DeadLetterErrorDescription != nil {
		m.ApplicationProperties = m.ApplicationProperties.Set(propDLDescription, *rm.DeadLetterErrorDescription)
	}

	ann := amqp.Map{}
	if rm.SequenceNumber != nil {
		ann = append(ann, amqp.MapEntry{Key: annSequenceNumber, Value: *rm.SequenceNumber})
	}
	if rm.EnqueuedTime != nil {
		ann = append(ann, amqp.MapEntry{Key: annEnqueuedTime, Value: rm.EnqueuedTime.UTC()})
	}
	if rm.LockedUntil != nil {
		ann = append(ann, amqp.MapEntry{Key: annLockedUntil, Value: rm.LockedUntil.UTC()})
	}
	if rm.ScheduledEnqueueTime != nil {
		ann = append(ann, amqp.MapEntry{Key: annScheduledEnqueue, Value: rm.ScheduledEnqueueTime.UTC()})
	}
	if rm.PartitionKey != nil {
		ann = append(ann, amqp.MapEntry{Key: annPartitionKey, Value: *rm.PartitionKey})
	}
	if rm.DeadLetterSource != nil {
		ann = append(ann, amqp.MapEntry{Key: annDeadLetterSource, Value: *rm.DeadLetterSource})
	}
	if rm.EnqueuedSequenceNumber != nil {
		ann = append(ann, amqp.MapEntry{Key: annEnqueuedSeq, Value: *rm.EnqueuedSequenceNumber})
	}
	switch rm.State {
	case azservicebus.MessageStateDeferred:
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int32(1)})
	case azservicebus.MessageStateScheduled:
		ann = append(ann, amqp.MapEntry{Key: annMessageState, Value: int32(2)})
	}
	m.MessageAnnotations = ann

	if withLockToken && rm.LockToken != ([16]byte{}) {
		m.DeliveryAnnotations = amqp.Map{{Key: annLockToken, Value: amqp.UUID(rm.LockToken)}}
	}
	m.Data = [][]byte{rm.Body}
	if rm.RawAMQPMessage != nil {
		applyRaw(m, rm.RawAMQPMessage) // as the client sent it (SDK live tests TestSender_SendAMQPMessageWith*)
	}
	return m
}

// deliveryTag returns the delivery tag that carries a lock token: the token's bytes in
// .NET GUID order (the first three fields little-endian), which the SDK swaps back.
func deliveryTag(token [16]byte) []byte {
	t := token
	t[0], t[1], t[2], t[3] = t[3], t[2], t[1], t[0]
	t[4], t[5] = t[5], t[4]
	t[6], t[7] = t[7], t[6]
	return t[:]
}

// propsFromAnnotations converts the annotations of a modified outcome (the SDK's
// PropertiesToModify) to application properties.
func propsFromAnnotations(m amqp.Map) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for _, e := range m {
		if k, ok := keyString(e.Key); ok {
			out[k] = e.Value
		}
	}
	return out
}
