package serialize

import (
	"reflect"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// jsonMediaType is the implied content type of a body converted from an AMQP value.
const jsonMediaType = "application/json"

// MessageBody returns the payload bytes of a received message, refusing more than limit
// bytes (zero means [DefaultMaxBodySize], negative no limit) with an error wrapping
// [ErrBodyTooLarge].
//
// msg.Body is used when it is not empty. Otherwise the AMQP body (msg.RawAMQPMessage.Body)
// is read, because the SDK fills Body only from a message with exactly one data section:
//
//   - several data sections are concatenated;
//   - an amqp-value section that is a string, a symbol or binary (what older .NET
//     clients send for a string or byte[] body) gives its bytes, a string as UTF-8;
//   - any other amqp-value (a map, a list, a number, a boolean, a timestamp: the AMQP
//     graph that .NET Framework clients make from IDictionary<string,object> and
//     ArrayList) is converted to JSON: maps with string keys become objects, lists
//     arrays, binaries base64 strings, timestamps RFC 3339 strings, UUIDs their
//     canonical strings;
//   - amqp-sequence sections give the concatenated bytes of their elements when these are
//     all strings or binaries, and otherwise a JSON array of all their elements.
//
// A value that cannot be converted (a map with non-string keys, NaN, nesting deeper than
// 100) fails with an error wrapping [ErrUnsupportedBody]. A message with no body at all
// gives an empty, non-nil slice. The returned slice may alias the message; do not modify
// it.
//
// [Registry.Decode] reads a body converted to JSON with the JSON codec when the message has
// no ContentType.
func MessageBody(msg *azservicebus.ReceivedMessage, limit int) ([]byte, error) {
	body, _, err := messageBody(msg, limit)
	return body, err
}

// messageBody is [MessageBody] that also returns the content type implied by the body's
// form ("application/json" for a converted AMQP value, otherwise "").
func messageBody(msg *azservicebus.ReceivedMessage, limit int) ([]byte, string, error) {
	if msg == nil {
		return nil, "", sbkit.ErrNilMessage
	}
	limit = bodyLimit(limit)
	if len(msg.Body) > 0 || msg.RawAMQPMessage == nil {
		if len(msg.Body) > limit {
			return nil, "", tooLarge(len(msg.Body), limit)
		}
		if msg.Body == nil {
			return []byte{}, "", nil
		}
		return msg.Body, "", nil
	}
	body := msg.RawAMQPMessage.Body
	var parts [][]byte
	switch {
	case len(body.Data) > 0:
		parts = body.Data
	case body.Value != nil:
		if b, ok := amqpBytes(body.Value); ok {
			parts = [][]byte{b}
			break
		}
		return jsonBody(body.Value, limit)
	case len(body.Sequence) > 0:
		var all []any
		binary := true
		for _, section := range body.Sequence {
			for _, el := range section {
				all = append(all, el)
				if b, ok := amqpBytes(el); ok {
					parts = append(parts, b)
				} else {
					binary = false
				}
			}
		}
		if !binary {
			return jsonBody(all, limit)
		}
	}
	total := 0
	for _, p := range parts {
		total += len(p)
		if total > limit {
			return nil, "", tooLarge(total, limit)
		}
	}
	switch len(parts) {
	case 0:
		return []byte{}, "", nil
	case 1:
		return parts[0], "", nil
	}
	out := make([]byte, 0, total)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out, "", nil
}

func jsonBody(v any, limit int) ([]byte, string, error) {
	out, err := amqpJSON(v)
	if err != nil {
		return nil, "", err
	}
	if len(out) > limit {
		return nil, "", tooLarge(len(out), limit)
	}
	return out, jsonMediaType, nil
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
