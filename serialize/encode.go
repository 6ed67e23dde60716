package serialize

import (
	"cmp"
	"fmt"
	"reflect"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"google.golang.org/protobuf/proto"
)

// EncodeOptions changes one call of [Registry.Encode]. nil options, and zero fields, mean
// the defaults.
type EncodeOptions struct {
	// MessageType is the value written to the registry's [Options.MessageTypeProperty].
	// Default (""): [TypeName](v). It has no effect when MessageTypeProperty is empty.
	MessageType string
}

// Encode builds a message whose Body is v encoded by the codec of contentType and whose
// ContentType is contentType as given (trimmed); an empty contentType means the
// registry's [DefaultContentType]. When the registry has a MessageTypeProperty, that
// application property is set to [TypeName](v), or to [EncodeOptions.MessageType]; nil
// options mean defaults.
//
// Errors: [ErrNilRegistry]; [ErrNilValue] for a nil value or nil pointer (a nil slice or map
// is a value: JSON writes it as null); errors wrapping
// [ErrInvalidContentType] or [ErrUnknownContentType]; the codec's error (wrapping
// [ErrUnsupportedType] for a type it cannot encode); an error wrapping [ErrBodyTooLarge]
// when the body exceeds MaxBodySize, since receivers using the same limit would
// dead-letter it.
func (r *Registry) Encode(v any, contentType string, opts *EncodeOptions) (*azservicebus.Message, error) {
	if r == nil {
		return nil, ErrNilRegistry
	}
	if isNil(v) {
		return nil, ErrNilValue
	}
	var o EncodeOptions
	if opts != nil {
		o = *opts
	}
	contentType = strings.TrimSpace(contentType)
	if contentType == "" {
		contentType = r.defaultType
		if contentType == "" {
			contentType = DefaultContentType
		}
	}
	c, mt, err := r.Lookup(contentType)
	if err != nil {
		return nil, err
	}
	body, err := runMarshal(c, mt, v)
	if err != nil {
		return nil, fmt.Errorf("serialize: encode %T as %s (%s): %w", v, mt.Type, c.Name(), err)
	}
	if limit := r.MaxBodySize(); len(body) > limit {
		return nil, tooLarge(len(body), limit)
	}
	msg := &azservicebus.Message{Body: body, ContentType: &contentType}
	if r.typeProp != "" {
		msg.ApplicationProperties = map[string]any{r.typeProp: cmp.Or(o.MessageType, TypeName(v))}
	}
	return msg, nil
}

func runMarshal(c Codec, mt MediaType, v any) (body []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCodecPanic, c.Name(), p)
		}
	}()
	if mc, ok := c.(MediaTypeCodec); ok {
		return mc.MarshalMediaType(v, mt)
	}
	return c.Marshal(v)
}

// TypeName names v's type for the message-type property: the full name of a protocol
// buffer message ("google.protobuf.Struct"), otherwise the Go type without pointer stars
// ("main.Order"). It returns "" for nil.
func TypeName(v any) string {
	if v == nil {
		return ""
	}
	if m, ok := v.(proto.Message); ok {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.String()
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
