package deadletter

import (
	"maps"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/sbkit/sbkit"
)

// The application properties a re-drive writes on its copy.
const (
	// RedriveCountProperty counts how many times a message was re-driven: the copy
	// carries the original's count plus one (an int64), so that a consumer or a
	// [Filter] can tell a message that keeps coming back.
	RedriveCountProperty = "sbkit_redrive_count"
	// RedriveSubscriptionProperty names the subscription a copy is meant for, when
	// [RedriveOptions.Subscription] is set; the topic's rules route on it (see
	// [SubscriptionFilter]).
	RedriveSubscriptionProperty = "sbkit_redrive_subscription"
)

// The application properties in which Service Bus carries the dead-letter reason and
// description (the SDK reads them from there: azservicebus's newReceivedMessage). A
// copy leaves them out.
const (
	deadLetterReasonProperty      = "DeadLetterReason"
	deadLetterDescriptionProperty = "DeadLetterErrorDescription"
)

// simpleBody reports whether m's body is one data section (or none), which an
// [azservicebus.Message] carries as Body.
func simpleBody(raw *azservicebus.AMQPAnnotatedMessage) bool {
	return raw == nil || (raw.Body.Value == nil && raw.Body.Sequence == nil && len(raw.Body.Data) <= 1)
}

// redriveCount is m's RedriveCountProperty, 0 when it has none or it is not an integer.
func redriveCount(props map[string]any) int64 {
	switch v := props[RedriveCountProperty].(type) {
	case int64:
		return v
	case int32:
		return int64(v)
	case int:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case uint32:
		return int64(v)
	case uint16:
		return int64(v)
	case uint8:
		return int64(v)
	case uint64:
		return int64(v)
	}
	return 0
}

// copyProperties returns m's application properties without the dead-letter ones and
// the delayed-redelivery ones (sbkit.RedeliveryAttemptProperty and its kin), with
// the re-drive count raised and, when sub is not empty, the target subscription.
func copyProperties(props map[string]any, sub string) map[string]any {
	out := make(map[string]any, len(props)+2)
	maps.Copy(out, props)
	delete(out, deadLetterReasonProperty)
	delete(out, deadLetterDescriptionProperty)
	// A re-driven message is new work: a processor's delayed redelivery starts again
	// rather than finding its redeliveries spent (package receiver, Options.Redelivery).
	delete(out, sbkit.RedeliveryAttemptProperty)
	delete(out, sbkit.RedeliveryFirstFailureProperty)
	delete(out, sbkit.RedeliveryOriginalIDProperty)
	out[RedriveCountProperty] = redriveCount(props) + 1
	if sub != "" {
		out[RedriveSubscriptionProperty] = sub
	}
	return out
}

// ttl is the TTL a copy keeps: nil when the original had none (the SDK reports a message
// sent without a TTL as 0).
func ttl(d *time.Duration) *time.Duration {
	if d == nil || *d <= 0 {
		return nil
	}
	v := *d
	return &v
}

// redriveCopy is the copy of m that a re-drive sends: body, ContentType, MessageID,
// SessionID, PartitionKey, CorrelationID, Subject, To, ReplyTo, ReplyToSessionID, TTL and
// application properties, without the dead-letter properties, with the re-drive count.
// ScheduledEnqueueTime is not kept (it has passed). The body is shared, not copied.
func redriveCopy(m *azservicebus.ReceivedMessage, sub string) *azservicebus.Message {
	id := m.MessageID // not the received message's own field, which the copy would share
	c := m.Message()
	c.ApplicationProperties = copyProperties(m.ApplicationProperties, sub)
	c.MessageID = &id
	c.ScheduledEnqueueTime = nil
	c.TimeToLive = ttl(m.TimeToLive)
	return c
}

// partitionKeyAnnotation is where AMQP carries the partition key (azservicebus's
// message.go names it so).
const partitionKeyAnnotation = "x-opt-partition-key"

// redriveAMQPCopy is redriveCopy for a message whose body an [azservicebus.Message]
// cannot carry: the AMQP message with the same body and properties.
func redriveAMQPCopy(m *azservicebus.ReceivedMessage, sub string) *azservicebus.AMQPAnnotatedMessage {
	raw := m.RawAMQPMessage
	am := &azservicebus.AMQPAnnotatedMessage{
		ApplicationProperties: copyProperties(m.ApplicationProperties, sub),
		Body:                  raw.Body,
		Footer:                raw.Footer,
	}
	if raw.Properties != nil {
		p := *raw.Properties
		p.AbsoluteExpiryTime = nil
		p.CreationTime = nil
		am.Properties = &p
	}
	if t := ttl(m.TimeToLive); t != nil || raw.Header != nil {
		am.Header = &azservicebus.AMQPAnnotatedMessageHeader{Durable: true}
		if raw.Header != nil {
			am.Header.Priority = raw.Header.Priority
		}
		if t != nil {
			am.Header.TTL = *t
		}
	}
	if m.PartitionKey != nil {
		am.MessageAnnotations = map[any]any{partitionKeyAnnotation: *m.PartitionKey}
	}
	return am
}
