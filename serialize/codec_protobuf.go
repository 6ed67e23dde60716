package serialize

import (
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
)

// ProtobufCodec reads and writes protocol buffer messages in the binary wire format. The
// value must be a [proto.Message]; a decode target may also be a pointer to a (possibly
// nil) message pointer, as Decode[*pb.Order] passes. The zero value is ready to use.
// Safe for concurrent use.
//
// The wire format has no framing or schema check: many byte strings decode "successfully"
// into any message (as unknown fields). Put the protobuf codec last in a fallback chain,
// or only use it for its own content types.
type ProtobufCodec struct{}

// Name returns "protobuf".
func (ProtobufCodec) Name() string { return "protobuf" }

// Marshal encodes v, which must be a [proto.Message].
func (ProtobufCodec) Marshal(v any) ([]byte, error) {
	m, ok := protoMessage(v)
	if !ok {
		return nil, fmt.Errorf("%w: protobuf needs a proto.Message, got %T", ErrUnsupportedType, v)
	}
	return proto.Marshal(m)
}

// Unmarshal decodes data into v, a [proto.Message] or a pointer to one.
func (ProtobufCodec) Unmarshal(data []byte, v any) error {
	m, ok := protoTarget(v)
	if !ok {
		return fmt.Errorf("%w: protobuf needs a proto.Message target, got %T", ErrUnsupportedType, v)
	}
	return proto.Unmarshal(data, m)
}

var protoMessageType = reflect.TypeFor[proto.Message]()

// protoMessage reports whether v is a non-nil [proto.Message].
func protoMessage(v any) (proto.Message, bool) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, false
	}
	if rv := reflect.ValueOf(m); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return nil, false
	}
	return m, true
}

// protoTarget returns the message to decode into when v is a non-nil [proto.Message], or a
// non-nil pointer to a message pointer (allocating the message when that is nil).
func protoTarget(v any) (proto.Message, bool) {
	if m, ok := protoMessage(v); ok {
		return m, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return nil, false
	}
	elem := rv.Elem()
	if elem.Kind() != reflect.Pointer || !elem.Type().Implements(protoMessageType) {
		return nil, false
	}
	if elem.IsNil() {
		elem.Set(reflect.New(elem.Type().Elem()))
	}
	return elem.Interface().(proto.Message), true
}
