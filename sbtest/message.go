package sbtest

import (
	"encoding/hex"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// payload is the immutable user part of a stored message. It is deep-copied from the
// sender's message, shared by the copies a topic fans out, and copied again into every
// ReceivedMessage handed out, so neither side's mutations reach the other.
type payload struct {
	body                                              []byte
	props                                             map[string]any
	messageID                                         string
	contentType, correlationID, partitionKey, replyTo *string
	replyToSessionID, sessionID, subject, to          *string
	ttl                                               *time.Duration
	raw                                               rawAMQP // sent over AMQP: what the Message cannot carry
	size                                              int
	forwarded                                         // auto-forwarding's fields (forward.go)
}

func newPayload(m *azservicebus.Message) *payload {
	p := &payload{
		body:             cloneBytes(m.Body),
		props:            cloneProps(m.ApplicationProperties),
		contentType:      cloneStr(m.ContentType),
		correlationID:    cloneStr(m.CorrelationID),
		partitionKey:     cloneStr(m.PartitionKey),
		replyTo:          cloneStr(m.ReplyTo),
		replyToSessionID: cloneStr(m.ReplyToSessionID),
		sessionID:        cloneStr(m.SessionID),
		subject:          cloneStr(m.Subject),
		to:               cloneStr(m.To),
		size:             int(sbkit.MessageSize(m)),
	}
	if m.MessageID != nil {
		p.messageID = *m.MessageID
	}
	if p.messageID == "" {
		// The service assigns a GUID when the sender leaves MessageId empty (the SDK's
		// live test Test_Sender_MessageID: "this is filled in by automatically").
		p.messageID = newMessageID()
	}
	if m.TimeToLive != nil {
		ttl := *m.TimeToLive
		p.ttl = &ttl
	}
	return p
}

// withProps returns a copy of p whose application properties are p's with mods applied.
func (p *payload) withProps(mods map[string]any) *payload {
	if len(mods) == 0 {
		return p
	}
	q := *p
	q.props = cloneProps(p.props)
	if q.props == nil {
		q.props = make(map[string]any, len(mods))
	}
	for k, v := range cloneProps(mods) {
		q.props[k] = v
	}
	return &q
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func cloneStr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

func cloneTime(t time.Time) *time.Time {
	t = t.UTC()
	return &t
}

// cloneProps copies a property map; []byte values are copied too, other values are
// immutable in practice (numbers, strings, times).
func cloneProps(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := maps.Clone(m)
	for k, v := range c {
		if b, ok := v.([]byte); ok {
			c[k] = cloneBytes(b)
		}
	}
	return c
}

// rawAMQP makes ReceivedMessage.RawAMQPMessage, from the received Body, for a message a
// client sent over AMQP with parts the SDK's Message has no field for (a value or
// sequence body, several data sections, annotations, a footer, a priority); nil for
// other messages. The wire server makes it when it decodes the message (rawOf); the
// model keeps it with the payload and calls it for every copy it hands out.
type rawAMQP = func(body []byte) *azservicebus.AMQPAnnotatedMessage

// msgState is where a stored message is.
type msgState uint8

const (
	stAvailable msgState = iota
	stLocked
	stDeferred
	stScheduled
)

// message is one stored message of one subqueue. It is guarded by its entity's mutex.
type message struct {
	p           *payload
	seq         int64
	enqueued    time.Time // for a scheduled message: its scheduled time
	scheduledAt time.Time // zero unless it was scheduled
	ttl         time.Duration
	expiresAt   time.Time
	expires     bool   // ttl is finite: the message is in the expiry heap while available/deferred
	count       uint32 // DeliveryCount: 1, plus 1 per abandon or lock expiry (see release)
	orphaned    bool   // locked by a receiver whose link is gone (closed, dropped)
	touched     bool   // delivered once: peek shows the entity's TTL from then on (peek.go)
	state       msgState
	wasDeferred bool // locked via ReceiveDeferredMessages: an abandon returns it to deferred
	token       [16]byte
	lockedUntil time.Time
	holder      *Receiver
	idx         [numHeaps]int
	dlReason    *string
	dlDesc      *string
}

// newMessageID returns a random GUID as 32 hex digits, the form the Service Bus clients
// have long given the MessageIds they generate.
func newMessageID() string {
	t := newLockToken()
	return hex.EncodeToString(t[:])
}

func newLockToken() [16]byte {
	var t [16]byte
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		t[i] = byte(a >> (8 * i))
		t[8+i] = byte(b >> (8 * i))
	}
	t[6] = t[6]&0x0f | 0x40 // looks like a version 4 UUID, as the service's tokens do
	t[8] = t[8]&0x3f | 0x80
	return t
}

// received builds the ReceivedMessage handed to a client: a fresh deep copy.
func (m *message) received() *azservicebus.ReceivedMessage {
	p := m.p
	seq := m.seq
	ttl := m.ttl
	rm := &azservicebus.ReceivedMessage{
		ApplicationProperties:      cloneProps(p.props),
		Body:                       cloneBytes(p.body),
		ContentType:                cloneStr(p.contentType),
		CorrelationID:              cloneStr(p.correlationID),
		DeadLetterErrorDescription: cloneStr(m.dlDesc),
		DeadLetterReason:           cloneStr(m.dlReason),
		DeliveryCount:              m.count,
		EnqueuedTime:               cloneTime(m.enqueued),
		ExpiresAt:                  cloneTime(m.expiresAt),
		MessageID:                  p.messageID,
		PartitionKey:               cloneStr(p.partitionKey),
		ReplyTo:                    cloneStr(p.replyTo),
		ReplyToSessionID:           cloneStr(p.replyToSessionID),
		SequenceNumber:             &seq,
		SessionID:                  cloneStr(p.sessionID),
		Subject:                    cloneStr(p.subject),
		TimeToLive:                 &ttl,
		To:                         cloneStr(p.to),
	}
	if !m.scheduledAt.IsZero() {
		rm.ScheduledEnqueueTime = cloneTime(m.scheduledAt)
	}
	if p.raw != nil {
		rm.RawAMQPMessage = p.raw(rm.Body)
	}
	switch {
	case m.state == stScheduled:
		rm.State = azservicebus.MessageStateScheduled
	case m.state == stDeferred || m.wasDeferred:
		rm.State = azservicebus.MessageStateDeferred
	default:
		rm.State = azservicebus.MessageStateActive
	}
	if m.state == stLocked {
		rm.LockToken = m.token
		rm.LockedUntil = cloneTime(m.lockedUntil)
		if m.holder != nil && m.holder.sess != nil {
			rm.LockedUntil = cloneTime(m.holder.sess.lockedUntil) // a session's messages are locked by its lock
		}
	}
	p.setForwarded(rm)
	return rm
}
