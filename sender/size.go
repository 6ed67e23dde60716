package sender

import "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

// sizeOverhead is the fixed part of Size: AMQP framing, header and the system
// properties the SDK always writes.
const sizeOverhead = 128

// Size returns the estimate of a message's encoded size that the Sender counts against
// its byte window and its batches: the body, the string properties, the application
// properties (keys, string and []byte values in full, 16 bytes for other values) and
// a fixed overhead of 128 bytes. The SDK's batch measures exact sizes; the estimate
// only decides when to seal a batch and how much memory is in flight.
// Size of a nil message is 0.
func Size(m *azservicebus.Message) int64 {
	if m == nil {
		return 0
	}
	n := sizeOverhead + len(m.Body)
	for _, p := range [...]*string{m.ContentType, m.CorrelationID, m.MessageID, m.PartitionKey,
		m.ReplyTo, m.ReplyToSessionID, m.SessionID, m.Subject, m.To} {
		if p != nil {
			n += len(*p)
		}
	}
	for k, v := range m.ApplicationProperties {
		n += len(k) + 8
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 16
		}
	}
	return int64(n)
}

// keyOf returns the ordering and batching key of a message: its SessionID, or its
// PartitionKey when it has no SessionID, or "" when it has neither.
func keyOf(m *azservicebus.Message) string {
	switch {
	case m.SessionID != nil:
		return "s:" + *m.SessionID
	case m.PartitionKey != nil:
		return "p:" + *m.PartitionKey
	}
	return ""
}
