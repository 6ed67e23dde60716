package serialize

import (
	"fmt"
	"reflect"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// MessageBody returns the payload bytes of a received message, refusing more than limit
// bytes (limit <= 0 means DefaultMaxBodySize) with an error wrapping ErrBodyTooLarge.
//
// msg.Body is used when it is not empty. Otherwise the AMQP body (msg.RawAMQPMessage.Body)
// is read, because the SDK fills Body only from a message with exactly one data section:
//
//   - several data sections are concatenated;
//   - an amqp-value section (what older .NET clients send for a string or byte[] body)
//     that is a string, a symbol or binary gives its bytes (a string as UTF-8);
//   - amqp-sequence sections whose elements are all strings or binaries give their
//     concatenated bytes.
//
// Any other amqp-value (a number, a map, a list) fails with an error wrapping
// ErrUnsupportedBody. A message with no body at all gives an empty, non-nil slice. The
// returned slice may alias the message; do not modify it.
func MessageBody(msg *azservicebus.ReceivedMessage, limit int) ([]byte, error) {
	if msg == nil {
		return nil, sbkit.ErrNilMessage
	}
	if limit <= 0 {
		limit = DefaultMaxBodySize
	}
	if len(msg.Body) > 0 || msg.RawAMQPMessage == nil {
		if len(msg.Body) > limit {
			return nil, tooLarge(len(msg.Body), limit)
		}
		if msg.Body == nil {
			return []byte{}, nil
		}
		return msg.Body, nil
	}
	body := msg.RawAMQPMessage.Body
	var parts [][]byte
	switch {
	case len(body.Data) > 0:
		parts = body.Data
	case body.Value != nil:
		b, ok := amqpBytes(body.Value)
		if !ok {
			return nil, fmt.Errorf("%w: amqp-value of type %T", ErrUnsupportedBody, body.Value)
		}
		parts = [][]byte{b}
	case len(body.Sequence) > 0:
		for i, section := range body.Sequence {
			for j, el := range section {
				b, ok := amqpBytes(el)
				if !ok {
					return nil, fmt.Errorf("%w: amqp-sequence %d element %d of type %T", ErrUnsupportedBody, i, j, el)
				}
				parts = append(parts, b)
			}
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p)
		if total > limit {
			return nil, tooLarge(total, limit)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	out := make([]byte, 0, total)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, nil
}

// amqpBytes returns the bytes of an AMQP string, symbol (a named string type in go-amqp)
// or binary value.
func amqpBytes(v any) ([]byte, bool) {
	switch x := v.(type) {
	case []byte:
		return x, true
	case string:
		return []byte(x), true
	}
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.String:
		return []byte(rv.String()), true
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Uint8:
		return rv.Bytes(), true
	}
	return nil, false
}
