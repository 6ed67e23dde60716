package serialize

import (
	"errors"
	"fmt"
	"maps"
	"reflect"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/sbkit/sbkit"
)

// Decode decodes msg's body into a new T by the message's ContentType and the registry's
// fallbacks (see [Registry.Decode]). T is usually a struct, a proto message pointer
// (*pb.Order), string or []byte.
func Decode[T any](r *Registry, msg *azservicebus.ReceivedMessage) (T, error) {
	var v T
	err := r.Decode(msg, &v)
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// Decode decodes msg's body (see [MessageBody]) into v, a non-nil pointer.
//
// A body converted from an AMQP map or list (see [MessageBody]) is read as
// "application/json" when msg has no ContentType.
//
// The codec of msg.ContentType is tried first; when the content type is missing,
// unparsable or unknown, or its codec fails, each fallback is tried in order (a media type
// identical to one already tried is skipped). Before each further attempt *v is reset to
// its zero value, so a partial decode does not leak into the next one.
//
// Errors: [sbkit.ErrNilMessage], [ErrNilRegistry], [ErrNilValue] or [ErrInvalidTarget] for bad
// arguments; an error wrapping [ErrBodyTooLarge] or [ErrUnsupportedBody] when the body cannot
// be read; otherwise, when every attempt failed, a [*DecodeError] listing them.
func (r *Registry) Decode(msg *azservicebus.ReceivedMessage, v any) error {
	if r == nil {
		return ErrNilRegistry
	}
	if msg == nil {
		return sbkit.ErrNilMessage
	}
	if err := checkTarget(v); err != nil {
		return err
	}
	body, implied, err := messageBody(msg, r.MaxBodySize())
	if err != nil {
		return err
	}
	contentType := implied
	if msg.ContentType != nil && *msg.ContentType != "" {
		contentType = *msg.ContentType
	}
	return r.decode(contentType, body, v)
}

// DecodeBytes decodes body, described by contentType, into v exactly as Decode does for a
// message with that body and ContentType.
func (r *Registry) DecodeBytes(contentType string, body []byte, v any) error {
	if r == nil {
		return ErrNilRegistry
	}
	if err := checkTarget(v); err != nil {
		return err
	}
	if limit := r.MaxBodySize(); len(body) > limit {
		return tooLarge(len(body), limit)
	}
	return r.decode(contentType, body, v)
}

func checkTarget(v any) error {
	if v == nil {
		return ErrNilValue
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer {
		return fmt.Errorf("%w, got %T", ErrInvalidTarget, v)
	}
	if rv.IsNil() {
		return fmt.Errorf("%w: nil %T", ErrNilValue, v)
	}
	return nil
}

func (r *Registry) decode(contentType string, body []byte, v any) error {
	derr := &DecodeError{ContentType: contentType}
	tried := make(map[string]bool)
	try := func(mt MediaType, fallback bool) bool {
		name := mt.Type
		if len(mt.Params) > 0 {
			name = mt.String()
		}
		key := attemptKey(mt)
		if tried[key] {
			return false
		}
		tried[key] = true
		a := Attempt{MediaType: name, Fallback: fallback}
		c, err := r.codecFor(mt)
		if err == nil {
			a.Codec = c.Name()
			if len(derr.Attempts) > 0 {
				reflect.ValueOf(v).Elem().SetZero()
			}
			if err = runCodec(c, mt, body, v); err == nil {
				return true
			}
		}
		a.Err = err
		derr.Attempts = append(derr.Attempts, a)
		return false
	}

	mt, err := ParseMediaType(contentType)
	switch {
	case err == nil:
		if try(mt, false) {
			return nil
		}
	case errors.Is(err, ErrNoContentType):
		derr.Attempts = append(derr.Attempts, Attempt{Err: ErrNoContentType})
	default:
		derr.Attempts = append(derr.Attempts, Attempt{MediaType: contentType, Err: err})
	}
	for _, fb := range r.fallbackList() {
		if try(fb, true) {
			return nil
		}
	}
	return derr
}

// runCodec runs one decoder, turning a panic into an error wrapping [ErrCodecPanic].
func runCodec(c Codec, mt MediaType, body []byte, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCodecPanic, c.Name(), p)
		}
	}()
	if mc, ok := c.(MediaTypeCodec); ok {
		return mc.UnmarshalMediaType(body, mt, v)
	}
	return c.Unmarshal(body, v)
}

// attemptKey identifies what a decoding attempt would do, so that a fallback equal to an
// earlier attempt is not run again: "application/json; charset=utf-8" and
// "application/json" decode alike, since UTF-8 is every codec's default charset.
func attemptKey(mt MediaType) string {
	if cs := mt.Charset(); cs == "utf-8" || cs == "utf8" {
		params := maps.Clone(mt.Params)
		delete(params, "charset")
		mt.Params = params
	}
	return mt.String()
}
