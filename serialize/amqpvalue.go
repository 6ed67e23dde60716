package serialize

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/sbkit/sbkit/internal/guid"
)

// maxAMQPDepth bounds the nesting of AMQP maps and lists converted to JSON.
const maxAMQPDepth = 100

// amqpJSON converts an AMQP value (a map, list, number, boolean, timestamp, UUID, or any
// nesting of them, as go-amqp decodes the amqp-value section that .NET Framework clients
// produce from IDictionary<string,object> and ArrayList) to JSON.
func amqpJSON(v any) ([]byte, error) {
	plain, err := jsonable(reflect.ValueOf(v), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupportedBody, err)
	}
	out, err := json.Marshal(plain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupportedBody, err)
	}
	return out, nil
}

var timeType = reflect.TypeFor[time.Time]()

// jsonable turns rv into a tree of values that encoding/json writes predictably: maps
// with string keys, []any, strings, numbers, booleans, nil.
func jsonable(rv reflect.Value, depth int) (any, error) {
	if depth > maxAMQPDepth {
		return nil, fmt.Errorf("AMQP value nested deeper than %d", maxAMQPDepth)
	}
	if !rv.IsValid() {
		return nil, nil
	}
	if rv.Type() == timeType {
		return rv.Interface().(time.Time).UTC().Format(time.RFC3339Nano), nil
	}
	switch rv.Kind() {
	case reflect.Interface, reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return jsonable(rv.Elem(), depth+1)
	case reflect.String:
		return rv.String(), nil // includes go-amqp's Symbol
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint(), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil // NaN and Inf make json.Marshal fail
	case reflect.Array:
		if rv.Type().Elem().Kind() == reflect.Uint8 && rv.Len() == 16 { // amqp.UUID
			var u [16]byte
			reflect.Copy(reflect.ValueOf(u[:]), rv)
			return guid.Format(u), nil
		}
		return jsonList(rv, depth)
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return rv.Bytes(), nil // binary: base64 in JSON
		}
		return jsonList(rv, depth)
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		iter := rv.MapRange()
		for iter.Next() {
			k := iter.Key()
			for k.Kind() == reflect.Interface && !k.IsNil() {
				k = k.Elem()
			}
			if k.Kind() != reflect.String {
				return nil, fmt.Errorf("AMQP map key of type %s", k.Type())
			}
			val, err := jsonable(iter.Value(), depth+1)
			if err != nil {
				return nil, err
			}
			out[k.String()] = val
		}
		return out, nil
	}
	return nil, fmt.Errorf("AMQP value of type %s", rv.Type())
}

func jsonList(rv reflect.Value, depth int) (any, error) {
	out := make([]any, rv.Len())
	for i := range out {
		val, err := jsonable(rv.Index(i), depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = val
	}
	return out, nil
}
