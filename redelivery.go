package sbkit

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// The application properties a copy scheduled by a processor's delayed redelivery carries
// (package receiver, RedeliveryOptions). A copy is a new message to the broker: its
// DeliveryCount starts again at 1, so the attempt it stands for lives in these properties.
const (
	// RedeliveryAttemptProperty is the copy's redelivery number: 1 for the first copy of
	// an original message, 2 for a copy of that copy, and so on (an int64).
	RedeliveryAttemptProperty = "sbkit-redelivery-attempt"
	// RedeliveryFirstFailureProperty is when the original message failed the delivery
	// that made its first copy (a time.Time, UTC): the start of its redeliveries.
	RedeliveryFirstFailureProperty = "sbkit-redelivery-first-failure"
	// RedeliveryOriginalIDProperty is the MessageID of the original message (a string):
	// every copy of one message carries the same one (see OriginalMessageID).
	RedeliveryOriginalIDProperty = "sbkit-redelivery-original-message-id"
)

// maxMessageIDLength is the longest MessageID Service Bus accepts ("Messages, payloads,
// and serialization": MessageId, "maximum length is 128 characters").
const maxMessageIDLength = 128

// RetryAfter returns a handler result that asks for the message to be redelivered through
// the broker after delay: the processor schedules a copy of it on its entity at now +
// delay and completes the original once the broker accepted the copy (package receiver,
// Options.Redelivery). A delay of zero or less lets the processor's policy choose it.
// cause may be nil. A processor without a redelivery policy abandons the message, as for
// any error, and reports that it could not redeliver it: [SettlementOf] tells
// ActionAbandon for it.
func RetryAfter(delay time.Duration, cause error) error {
	return &SettleError{Action: ActionAbandon, Redeliver: true, Delay: max(delay, 0), Err: cause}
}

// RedeliveryMessageID returns the MessageID of the copy that redelivers, for the attempt-th
// time, the message whose original MessageID is originalID: originalID + "+r" + attempt,
// or, when that would pass the 128 characters Service Bus accepts, the hex SHA-256 of
// originalID in its place. Two copies of one attempt get one MessageID, so that the
// entity's duplicate detection drops the second.
func RedeliveryMessageID(originalID string, attempt int) string {
	suffix := "+r" + strconv.Itoa(attempt)
	if len(originalID)+len(suffix) > maxMessageIDLength {
		sum := sha256.Sum256([]byte(originalID))
		originalID = hex.EncodeToString(sum[:])
	}
	return originalID + suffix
}

// OriginalMessageID returns the MessageID of the message that message redelivers (its
// [RedeliveryOriginalIDProperty]), or message.MessageID when it is not a redelivered copy.
// Every copy of one message gives the same work the same key: package dedupe keys on it.
func OriginalMessageID(message *azservicebus.ReceivedMessage) string {
	if message == nil {
		return ""
	}
	if id, ok := message.ApplicationProperties[RedeliveryOriginalIDProperty].(string); ok && id != "" {
		return id
	}
	return message.MessageID
}

// RedeliveryOf returns the redelivery attempt message stands for (0 for an original, one
// that no processor redelivered) and, for a copy, when its redeliveries began (the
// zero time when the property is missing).
func RedeliveryOf(message *azservicebus.ReceivedMessage) (attempt int, firstFailure time.Time) {
	if message == nil {
		return 0, time.Time{}
	}
	switch v := message.ApplicationProperties[RedeliveryAttemptProperty].(type) {
	case int64:
		attempt = int(v)
	case int32:
		attempt = int(v)
	case int:
		attempt = v
	case uint32:
		attempt = int(v)
	case uint64:
		attempt = int(v)
	}
	if attempt < 0 {
		attempt = 0
	}
	if t, ok := message.ApplicationProperties[RedeliveryFirstFailureProperty].(time.Time); ok {
		firstFailure = t
	}
	return attempt, firstFailure
}
