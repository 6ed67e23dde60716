package amqp

import (
	"reflect"

	"github.com/sbkit/sbkit/internal/guid"
)

// MaxDepth is the deepest nesting of compound values (lists, maps, arrays, described values)
// the decoder accepts; deeper input is rejected with an error wrapping ErrMalformed, so a
// crafted input cannot exhaust the stack.
const MaxDepth = 64

// Symbol is the AMQP symbol type: an ASCII name such as "amqp:not-found" or
// "x-opt-sequence-number". Its zero value is the empty symbol.
type Symbol string

// Char is the AMQP char type: one Unicode code point, encoded as UTF-32.
type Char rune

// UUID is the AMQP uuid type: 16 bytes in network (RFC 4122) order.
type UUID [16]byte

// String formats u as 8-4-4-4-12 lowercase hex digits.
func (u UUID) String() string { return guid.Format(u) }

// Decimal32 is the AMQP decimal32 type (IEEE 754 decimal, 32 bits), kept opaque as its
// four bytes in network order.
type Decimal32 [4]byte

// Decimal64 is the AMQP decimal64 type, kept opaque as its eight bytes in network order.
type Decimal64 [8]byte

// Decimal128 is the AMQP decimal128 type, kept opaque as its sixteen bytes in network order.
type Decimal128 [16]byte

// MapEntry is one key/value pair of a Map.
type MapEntry struct {
	Key, Value any
}

// Map is the AMQP map type. It keeps the order of the encoded pairs and allows any AMQP
// value as a key (Service Bus uses symbols for annotations and strings for application
// properties). A nil Map encodes as null where a field is optional, and as an empty map
// when passed to Marshal directly.
type Map []MapEntry

// Annotations is a Map whose keys are symbols (or ulongs): message annotations,
// delivery annotations, footers and "fields" maps.
type Annotations = Map

// Get returns the value of the first entry whose key equals key, and whether there was one.
// Keys compare by Go type and value: Symbol("a") and "a" are different keys, as they are
// different AMQP values. Binary keys ([]byte) compare by content.
func (m Map) Get(key any) (any, bool) {
	for _, e := range m {
		if keyEqual(e.Key, key) {
			return e.Value, true
		}
	}
	return nil, false
}

// Set replaces the value of the first entry whose key equals key (see Get), or appends a
// new entry, and returns the map.
func (m Map) Set(key, value any) Map {
	for i, e := range m {
		if keyEqual(e.Key, key) {
			m[i].Value = value
			return m
		}
	}
	return append(m, MapEntry{Key: key, Value: value})
}

// keyEqual compares two map keys without panicking on uncomparable values.
func keyEqual(a, b any) bool {
	switch ka := a.(type) {
	case Symbol: // the usual keys: no reflection
		kb, ok := b.(Symbol)
		return ok && ka == kb
	case string:
		kb, ok := b.(string)
		return ok && ka == kb
	case []byte:
		kb, ok := b.([]byte)
		return ok && string(ka) == string(kb)
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return false
	}
	// Value.Comparable also looks inside interfaces: Described{Value: []any{}} has a
	// comparable type but == would panic on it.
	if a != nil && !reflect.ValueOf(a).Comparable() || b != nil && !reflect.ValueOf(b).Comparable() {
		return reflect.DeepEqual(a, b)
	}
	return a == b
}

// Array is the AMQP array type: a sequence of values that all have the same AMQP type
// (for example all Symbol). The encoder rejects mixed element types. An empty Array encodes
// as an array of nulls with count 0.
type Array []any

// Described is an AMQP described value: Descriptor is a uint64 (numeric descriptor) or a
// Symbol (symbolic descriptor), Value the described value.
type Described struct {
	Descriptor any
	Value      any
}

// Role is the role of a link endpoint: RoleSender (false) or RoleReceiver (true).
type Role bool

// The two link roles.
const (
	RoleSender   Role = false
	RoleReceiver Role = true
)

// SenderSettleMode is the snd-settle-mode of an attach.
type SenderSettleMode uint8

// Sender settle modes; the specification's default (field absent) is SenderSettleMixed.
const (
	SenderSettleUnsettled SenderSettleMode = 0
	SenderSettleSettled   SenderSettleMode = 1
	SenderSettleMixed     SenderSettleMode = 2
)

// ReceiverSettleMode is the rcv-settle-mode of an attach or transfer.
type ReceiverSettleMode uint8

// Receiver settle modes; the specification's default (field absent) is ReceiverSettleFirst.
const (
	ReceiverSettleFirst  ReceiverSettleMode = 0
	ReceiverSettleSecond ReceiverSettleMode = 1
)

// Ptr returns a pointer to v: a helper for the optional (pointer) fields of performatives
// and message sections.
func Ptr[T any](v T) *T { return &v }
