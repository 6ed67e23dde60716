package sbkit

import "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

// Estimated AMQP encoding costs, measured against [azservicebus.MessageBatch.NumBytes]
// (see size_test.go).
const (
	sizeFixed        = 34 // batch framing, header, properties and data section descriptors
	sizeUUID         = 36 // the MessageID the SDK sets when there is none
	sizeString       = 2  // constructor and length of a short string or binary
	sizeLong         = 3  // extra length bytes of a string or binary of 256 bytes or more
	sizeAppProps     = 12 // the application-properties section
	sizeScalar       = 9  // a number, time or other fixed-size value
	sizePartitionKey = 21 // the x-opt-partition-key annotation's key
	sizeSession      = 9  // the unset properties before group-id, when a session is set
	sizeTTL          = 20 // the header's ttl and the absolute expiry time
	sizeScheduled    = 39 // the x-opt-scheduled-enqueue-time annotation
)

// MessageSize estimates the bytes m adds to an SDK batch ([azservicebus.MessageBatch]),
// which is also what counts against the broker's message size limit: the body, the
// string properties, the application properties and the AMQP encoding around them. A
// message without a MessageID is counted with the 36-character UUID the SDK gives it.
// The estimate is within a few bytes of the SDK's count for common messages (the first
// message of a batch also pays about 60 bytes for the batch's envelope). Package sender
// counts it against its byte window and its batch limit, and package sbtest charges it
// against MaxMessageSize and batch sizes. MessageSize of a nil message is 0.
func MessageSize(m *azservicebus.Message) int64 {
	if m == nil {
		return 0
	}
	n := sizeFixed + encodedLen(len(m.Body)) - sizeString
	if m.MessageID == nil || *m.MessageID == "" {
		n += sizeString + sizeUUID
	}
	for _, p := range [...]*string{m.MessageID, m.ContentType, m.CorrelationID, m.PartitionKey,
		m.ReplyTo, m.ReplyToSessionID, m.SessionID, m.Subject, m.To} {
		if p != nil && *p != "" {
			n += encodedLen(len(*p))
		}
	}
	if m.PartitionKey != nil && *m.PartitionKey != "" {
		n += sizePartitionKey
	}
	if (m.SessionID != nil && *m.SessionID != "") || (m.ReplyToSessionID != nil && *m.ReplyToSessionID != "") {
		n += sizeSession
	}
	if m.TimeToLive != nil {
		n += sizeTTL
	}
	if m.ScheduledEnqueueTime != nil {
		n += sizeScheduled
	}
	if len(m.ApplicationProperties) > 0 {
		n += sizeAppProps
	}
	for k, v := range m.ApplicationProperties {
		n += encodedLen(len(k))
		switch v := v.(type) {
		case string:
			n += encodedLen(len(v))
		case []byte:
			n += encodedLen(len(v))
		case bool:
			n++
		default:
			n += sizeScalar
		}
	}
	if n >= 256 { // the batch frames a message of 256 bytes or more with a longer length
		n += sizeLong
	}
	return int64(n)
}

// encodedLen is the AMQP size of a string or binary of n bytes.
func encodedLen(n int) int {
	if n >= 256 {
		return n + sizeString + sizeLong
	}
	return n + sizeString
}
