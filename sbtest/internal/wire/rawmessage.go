package wire

import (
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// rawSections are the parts of an AMQP message a client sent that the SDK's Message has
// no field for. The service stores and returns them as sent (SDK live tests
// TestSender_SendAMQPMessageWithMultipleByteSlicesInData, ...WithValue, ...WithSequence),
// so the server keeps them with the message and hands them back on every delivery and
// in ReceivedMessage.RawAMQPMessage. Immutable once stored.
type rawSections struct {
	data       [][]byte // every data section, when there are more than one
	sequence   [][]any
	value      any
	hasValue   bool
	msgAnn     amqp.Map // without the annotations the broker reads or sets (brokerAnnotations)
	deliveryAn amqp.Map
	footer     amqp.Map
	priority   *uint8
	// props are the properties the Message has no field for: a message-id or
	// correlation-id that is not a string (a uuid, a ulong, a binary), user-id,
	// content-encoding and group-sequence. The properties belong to the bare message,
	// which is immutable (AMQP 1.0 part 3.2); creation-time is the broker's, with
	// absolute-expiry-time (fromReceived).
	props *amqp.Properties
}

// rawOf returns what of m the SDK's Message cannot carry, or nil when there is nothing.
func rawOf(m *amqp.Message) *rawSections {
	r := &rawSections{sequence: m.Sequence, value: m.Value, hasValue: m.HasValue, footer: m.Footer}
	if len(m.Data) > 1 {
		r.data = m.Data
	}
	for _, e := range m.MessageAnnotations {
		if k, ok := keyString(e.Key); ok && brokerAnnotations[k] {
			continue // read into the Message, or the broker's own
		}
		r.msgAnn = append(r.msgAnn, e)
	}
	for _, e := range m.DeliveryAnnotations {
		if k, ok := keyString(e.Key); ok && k == string(annLockToken) {
			continue // the broker's own: the lock token of a delivery
		}
		r.deliveryAn = append(r.deliveryAn, e)
	}
	if m.Header != nil {
		r.priority = m.Header.Priority
	}
	r.props = extraProperties(m.Properties)
	if r.data == nil && len(r.sequence) == 0 && !r.hasValue && len(r.msgAnn) == 0 &&
		len(r.deliveryAn) == 0 && len(r.footer) == 0 && r.priority == nil && r.props == nil {
		return nil
	}
	return r
}

// extraProperties returns what of p the SDK's Message cannot carry, or nil.
func extraProperties(p *amqp.Properties) *amqp.Properties {
	if p == nil {
		return nil
	}
	x := &amqp.Properties{UserID: p.UserID, ContentEncoding: p.ContentEncoding, GroupSequence: p.GroupSequence}
	if _, ok := p.MessageID.(string); !ok {
		x.MessageID = p.MessageID
	}
	if _, ok := p.CorrelationID.(string); !ok {
		x.CorrelationID = p.CorrelationID
	}
	if x.MessageID == nil && x.CorrelationID == nil && x.UserID == nil && x.ContentEncoding == nil && x.GroupSequence == nil {
		return nil
	}
	return x
}

// keep returns what the model keeps of r with the message (RawAMQP): r's annotated, or
// nil when r is nil.
func (r *rawSections) keep() RawAMQP {
	if r == nil {
		return nil
	}
	return r.annotated
}

// annotated returns the sections as the SDK's AMQPAnnotatedMessage.
func (r *rawSections) annotated(body []byte) *azservicebus.AMQPAnnotatedMessage {
	am := &azservicebus.AMQPAnnotatedMessage{
		MessageAnnotations:  toAnyMap(r.msgAnn),
		DeliveryAnnotations: toAnyMap(r.deliveryAn),
		Footer:              toAnyMap(r.footer),
	}
	switch {
	case r.hasValue:
		am.Body.Value = r.value
	case len(r.sequence) > 0:
		am.Body.Sequence = r.sequence
	case r.data != nil:
		am.Body.Data = r.data
	default:
		am.Body.Data = [][]byte{body}
	}
	if r.priority != nil {
		am.Header = &azservicebus.AMQPAnnotatedMessageHeader{Priority: *r.priority}
	}
	if p := r.props; p != nil {
		am.Properties = &azservicebus.AMQPAnnotatedMessageProperties{MessageID: p.MessageID, CorrelationID: p.CorrelationID,
			UserID: p.UserID, ContentEncoding: symbolToString(p.ContentEncoding), GroupSequence: p.GroupSequence}
	}
	return am
}

// applyRaw writes the sections of raw back into m, the message being delivered: the
// body as sent, the client's annotations after the broker's, the footer and priority.
// The broker's annotations replace a client's of the same name, a string or a symbol,
// so that no key appears twice (AMQP 1.0 part 1.6.23: a map's keys are unique) and a
// client cannot forge a lock token, sequence number or lock expiry other receivers see
// ("AMQP 1.0 in Azure Service Bus and Event Hubs protocol guide", message annotations).
func applyRaw(m *amqp.Message, raw *azservicebus.AMQPAnnotatedMessage) {
	switch b := raw.Body; {
	case b.Value != nil:
		m.Data, m.Value, m.HasValue = nil, b.Value, true
	case len(b.Sequence) > 0:
		m.Data, m.Sequence = nil, b.Sequence
	case len(b.Data) > 0:
		m.Data = b.Data
	}
	m.MessageAnnotations = appendAbsent(m.MessageAnnotations, raw.MessageAnnotations)
	m.DeliveryAnnotations = appendAbsent(m.DeliveryAnnotations, raw.DeliveryAnnotations)
	for k, v := range raw.Footer {
		m.Footer = append(m.Footer, amqp.MapEntry{Key: k, Value: v})
	}
	if raw.Header != nil {
		p := raw.Header.Priority
		m.Header.Priority = &p
	}
	if rp := raw.Properties; rp != nil {
		p := m.Properties
		if rp.MessageID != nil {
			p.MessageID = rp.MessageID
		}
		if rp.CorrelationID != nil {
			p.CorrelationID = rp.CorrelationID
		}
		if rp.UserID != nil {
			p.UserID = rp.UserID
		}
		if rp.ContentEncoding != nil {
			p.ContentEncoding = amqp.Ptr(amqp.Symbol(*rp.ContentEncoding))
		}
		if rp.GroupSequence != nil {
			p.GroupSequence = rp.GroupSequence
		}
	}
}

// appendAbsent appends to the broker's annotations m the client's entries whose keys m
// does not already have, a textual key matching as a string or a symbol.
func appendAbsent(m amqp.Map, client map[any]any) amqp.Map {
	for k, v := range client {
		if hasKey(m, k) {
			continue
		}
		m = append(m, amqp.MapEntry{Key: k, Value: v})
	}
	return m
}

// hasKey reports whether m has key k, a string and a symbol of the same text counting
// as one key.
func hasKey(m amqp.Map, k any) bool {
	if _, ok := m.Get(k); ok {
		return true
	}
	s, ok := keyString(k)
	if !ok {
		return false
	}
	if _, ok := m.Get(s); ok {
		return true
	}
	_, ok = m.Get(amqp.Symbol(s))
	return ok
}

// toAnyMap converts an AMQP map to the SDK's map form; keys that cannot be map keys in
// Go (binary) are left out.
func toAnyMap(m amqp.Map) map[any]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[any]any, len(m))
	for _, e := range m {
		switch e.Key.(type) {
		case []byte, amqp.Map, amqp.Array, []any:
			continue
		}
		out[e.Key] = e.Value
	}
	return out
}
