package amqp

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// hx decodes hex with optional spaces, for readable expected encodings.
func hx(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// TestMarshalKnownEncodings checks the exact bytes of values whose encoding the
// specification fixes (part 1.6), including the choice of the smallest constructor.
func TestMarshalKnownEncodings(t *testing.T) {
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) // 1704067200000 ms = 0x18cc251f400
	long := strings.Repeat("x", 256)
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"null", nil, "40"},
		{"true", true, "41"},
		{"false", false, "42"},
		{"ubyte", uint8(7), "50 07"},
		{"ushort", uint16(0x1234), "60 12 34"},
		{"uint0", uint32(0), "43"},
		{"smalluint", uint32(255), "52 ff"},
		{"uint", uint32(256), "70 00 00 01 00"},
		{"ulong0", uint64(0), "44"},
		{"smallulong", uint64(0x75), "53 75"},
		{"ulong", uint64(1) << 40, "80 00 00 01 00 00 00 00 00"},
		{"byte", int8(-1), "51 ff"},
		{"short", int16(-2), "61 ff fe"},
		{"smallint", int32(-128), "54 80"},
		{"smallint 127", int32(127), "54 7f"},
		{"int 128", int32(128), "71 00 00 00 80"},
		{"int -129", int32(-129), "71 ff ff ff 7f"},
		{"smalllong", int64(5), "55 05"},
		{"long", int64(1000), "81 00 00 00 00 00 00 03 e8"},
		{"float", float32(1.5), "72 3f c0 00 00"},
		{"double", 1.5, "82 3f f8 00 00 00 00 00 00"},
		{"decimal32", Decimal32{1, 2, 3, 4}, "74 01 02 03 04"},
		{"decimal64", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}, "84 01 02 03 04 05 06 07 08"},
		{"decimal128", Decimal128{15: 9}, "94 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 09"},
		{"char", Char('A'), "73 00 00 00 41"},
		{"char emoji", Char('😀'), "73 00 01 f6 00"},
		{"timestamp", ts, "83 00 00 01 8c c2 51 f4 00"},
		{"timestamp before epoch", time.UnixMilli(-1), "83 ff ff ff ff ff ff ff ff"},
		{"uuid", UUID{0: 0x12, 15: 0x34}, "98 12 00 00 00 00 00 00 00 00 00 00 00 00 00 00 34"},
		{"vbin8", []byte("ab"), "a0 02 61 62"},
		{"vbin8 empty", []byte{}, "a0 00"},
		{"vbin32", bytes.Repeat([]byte("x"), 256), "b0 00 00 01 00" + strings.Repeat("78", 256)},
		{"str8", "ab", "a1 02 61 62"},
		{"str8 utf8", "é", "a1 02 c3 a9"},
		{"str32", long, "b1 00 00 01 00" + strings.Repeat("78", 256)},
		{"sym8", Symbol("ab"), "a3 02 61 62"},
		{"sym32", Symbol(long), "b3 00 00 01 00" + strings.Repeat("78", 256)},
		{"list0", []any{}, "45"},
		{"list0 nil", []any(nil), "45"},
		{"list8", []any{uint32(1), "a"}, "c0 06 02 52 01 a1 01 61"},
		{"list32", []any{long}, "d0 00 00 01 09 00 00 00 01 b1 00 00 01 00" + strings.Repeat("78", 256)},
		{"nested list", []any{[]any{}, nil}, "c0 03 02 45 40"},
		{"map8", Map{{Symbol("a"), true}}, "c1 05 02 a3 01 61 41"},
		{"map8 empty", Map{}, "c1 01 00"},
		{"map32", Map{{"k", long}}, "d1 00 00 01 0c 00 00 00 02 a1 01 6b b1 00 00 01 00" + strings.Repeat("78", 256)},
		{"array8 sym8", Array{Symbol("a"), Symbol("bc")}, "e0 07 02 a3 01 61 02 62 63"},
		{"array8 empty", Array{}, "e0 02 00 a3"},
		{"array8 uint", Array{uint32(1), uint32(0)}, "e0 0a 02 70 00 00 00 01 00 00 00 00"},
		{"array8 bool", Array{true, false}, "e0 04 02 56 01 00"},
		{"array8 long", Array{int64(-1)}, "e0 0a 01 81 ff ff ff ff ff ff ff ff"},
		{"array sym32", Array{Symbol(long)}, "f0 00 00 01 09 00 00 00 01 b3 00 00 01 00" + strings.Repeat("78", 256)},
		{"array of lists", Array{[]any{true}}, "e0 0b 01 d0 00 00 00 05 00 00 00 01 41"},
		{"array of maps", Array{Map{}}, "e0 0a 01 d1 00 00 00 04 00 00 00 00"},
		{"array of arrays", Array{Array{uint8(1)}}, "e0 0c 01 f0 00 00 00 06 00 00 00 01 50 01"},
		{"array of nulls", Array{nil, nil}, "e0 02 02 40"},
		{"array of described", Array{&Described{uint64(0x75), []byte("a")}, &Described{uint64(0x75), []byte("bc")}},
			"e0 0a 02 00 53 75 a0 01 61 02 62 63"},
		{"symbols", []Symbol{"a"}, "e0 04 01 a3 01 61"},
		{"described ulong", &Described{Descriptor: uint64(0x75), Value: []byte("hi")}, "00 53 75 a0 02 68 69"},
		{"described symbol", Described{Descriptor: Symbol("com.microsoft:x"), Value: "v"},
			"00 a3 0f 63 6f 6d 2e 6d 69 63 72 6f 73 6f 66 74 3a 78 a1 01 76"},
		{"nil *Described", (*Described)(nil), "40"},
		{"accepted", &Accepted{}, "00 53 24 45"},
		{"nil *Error", (*Error)(nil), "40"},
		{"error", &Error{Condition: "amqp:not-found"}, "00 53 1d c0 11 01 a3 0e 61 6d 71 70 3a 6e 6f 74 2d 66 6f 75 6e 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := hx(t, tt.want)
			got, err := Marshal(tt.v)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("Marshal(%#v)\n got % x\nwant % x", tt.v, got, want)
			}
			// AppendValue appends after existing bytes.
			got, err = AppendValue([]byte{0xee}, tt.v)
			if err != nil || got[0] != 0xee || !bytes.Equal(got[1:], want) {
				t.Fatalf("AppendValue: % x, %v", got, err)
			}
		})
	}
}

// TestUnmarshalConstructors decodes every constructor of the specification, including the
// alternatives the encoder never picks.
func TestUnmarshalConstructors(t *testing.T) {
	long := strings.Repeat("x", 300)
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"null", "40", nil},
		{"true", "41", true},
		{"false", "42", false},
		{"bool 1", "56 01", true},
		{"bool 0", "56 00", false},
		{"ubyte", "50 ff", uint8(255)},
		{"ushort", "60 ff fe", uint16(0xfffe)},
		{"uint0", "43", uint32(0)},
		{"smalluint", "52 07", uint32(7)},
		{"uint", "70 00 00 00 07", uint32(7)},
		{"uint max", "70 ff ff ff ff", uint32(math.MaxUint32)},
		{"ulong0", "44", uint64(0)},
		{"smallulong", "53 07", uint64(7)},
		{"ulong", "80 00 00 00 00 00 00 00 07", uint64(7)},
		{"byte", "51 80", int8(-128)},
		{"short", "61 80 00", int16(math.MinInt16)},
		{"smallint", "54 ff", int32(-1)},
		{"int", "71 ff ff ff ff", int32(-1)},
		{"int small value", "71 00 00 00 01", int32(1)},
		{"smalllong", "55 80", int64(-128)},
		{"long", "81 80 00 00 00 00 00 00 00", int64(math.MinInt64)},
		{"float", "72 bf 80 00 00", float32(-1)},
		{"double", "82 40 00 00 00 00 00 00 00", float64(2)},
		{"decimal32", "74 01 02 03 04", Decimal32{1, 2, 3, 4}},
		{"decimal64", "84 01 02 03 04 05 06 07 08", Decimal64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"decimal128", "94 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 02", Decimal128{0: 1, 15: 2}},
		{"char", "73 00 00 00 41", Char('A')},
		{"timestamp", "83 00 00 01 8c c2 51 f4 00", time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"uuid", "98 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f", UUID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"vbin8", "a0 01 ff", []byte{0xff}},
		{"vbin32", "b0 00 00 00 01 ff", []byte{0xff}},
		{"vbin32 long", "b0 00 00 01 2c" + strings.Repeat("78", 300), []byte(long)},
		{"str8", "a1 01 61", "a"},
		{"str32", "b1 00 00 00 01 61", "a"},
		{"str8 empty", "a1 00", ""},
		{"sym8", "a3 01 61", Symbol("a")},
		{"sym32", "b3 00 00 00 01 61", Symbol("a")},
		{"list0", "45", []any{}},
		{"list8 empty", "c0 01 00", []any{}},
		{"list8", "c0 03 02 41 40", []any{true, nil}},
		{"list32", "d0 00 00 00 06 00 00 00 02 41 40", []any{true, nil}},
		{"list32 empty", "d0 00 00 00 04 00 00 00 00", []any{}},
		{"map8", "c1 05 02 a3 01 61 41", Map{{Symbol("a"), true}}},
		{"map32", "d1 00 00 00 09 00 00 00 02 a1 01 61 52 01", Map{{"a", uint32(1)}}},
		{"map32 empty", "d1 00 00 00 04 00 00 00 00", Map{}},
		{"map ulong key", "c1 05 02 53 01 a1 00", Map{{uint64(1), ""}}},
		{"array8 sym8", "e0 07 02 a3 01 61 02 62 63", Array{Symbol("a"), Symbol("bc")}},
		{"array8 sym32", "e0 0d 02 b3 00 00 00 01 61 00 00 00 02 62 63", Array{Symbol("a"), Symbol("bc")}},
		{"array32 sym8", "f0 00 00 00 0a 00 00 00 02 a3 01 61 02 62 63", Array{Symbol("a"), Symbol("bc")}},
		{"array32 sym32", "f0 00 00 00 10 00 00 00 02 b3 00 00 00 01 61 00 00 00 02 62 63", Array{Symbol("a"), Symbol("bc")}},
		{"array uint0", "e0 02 03 43", Array{uint32(0), uint32(0), uint32(0)}},
		{"array smalluint", "e0 04 02 52 01 02", Array{uint32(1), uint32(2)}},
		{"array smallint", "e0 04 02 54 ff 01", Array{int32(-1), int32(1)}},
		{"array true", "e0 02 02 41", Array{true, true}},
		{"array list0", "e0 02 01 45", Array{[]any{}}},
		{"array list8", "e0 06 02 c0 01 00 01 00", Array{[]any{}, []any{}}},
		{"array map8", "e0 05 01 c1 02 00 00", nil}, // map8 of size 2, count 0, one stray byte: malformed
		{"array of described symbol", "e0 08 02 00 a3 01 64 52 01 02", Array{&Described{Symbol("d"), uint32(1)}, &Described{Symbol("d"), uint32(2)}}},
		{"array empty", "e0 02 00 40", Array{}},
		{"array32 empty", "f0 00 00 00 05 00 00 00 00 a1", Array{}},
		{"described ulong", "00 53 75 a0 01 61", &Described{uint64(0x75), []byte("a")}},
		{"described ulong0", "00 44 40", &Described{uint64(0), nil}},
		{"described ulong64", "00 80 00 00 01 37 00 00 00 01 41", &Described{uint64(0x13700000001), true}},
		{"described sym32", "00 b3 00 00 00 01 64 41", &Described{Symbol("d"), true}},
		{"described described", "00 53 01 00 53 02 40", &Described{uint64(1), &Described{uint64(2), nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hx(t, tt.in)
			in = append(in, 0xab) // a following byte must be left in rest
			v, rest, err := Unmarshal(in)
			if tt.want == nil && tt.name == "array map8" {
				if err == nil && len(rest) == 1 {
					t.Fatalf("want an error, got %#v", v)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(% x): %v", in, err)
			}
			if !reflect.DeepEqual(v, tt.want) {
				t.Fatalf("Unmarshal(% x) = %#v, want %#v", in, v, tt.want)
			}
			if !bytes.Equal(rest, []byte{0xab}) {
				t.Fatalf("rest = % x, want ab", rest)
			}
		})
	}
}

// TestRoundTrip encodes and decodes values of every Go type of the mapping.
func TestRoundTrip(t *testing.T) {
	now := time.UnixMilli(time.Now().UnixMilli()).UTC()
	values := []any{
		nil, true, false, uint8(200), uint16(65535), uint32(math.MaxUint32), uint64(math.MaxUint64),
		int8(math.MinInt8), int16(math.MaxInt16), int32(math.MinInt32), int64(math.MaxInt64),
		float32(math.Inf(-1)), math.MaxFloat64, Decimal32{9}, Decimal64{8}, Decimal128{7}, Char(0x10ffff),
		now, time.UnixMilli(math.MinInt64).UTC(), time.UnixMilli(math.MaxInt64).UTC(),
		UUID{1, 2, 3}, []byte{}, []byte("x"), "", "hello", Symbol(""), Symbol("s"),
		[]any{}, []any{nil, []any{Map{{"k", Array{int16(1), int16(2)}}}}},
		Map{}, Map{{nil, nil}, {Symbol("x-opt-enqueued-time"), now}, {uint64(1), []any{"a"}}},
		Array{}, Array{"a", "b"}, Array{[]byte("a")}, Array{now}, Array{UUID{1}}, Array{float64(1)},
		Array{Char('a')}, Array{Decimal128{1}}, Array{Array{}, Array{true}},
		&Described{Descriptor: Symbol("apache.org:selector-filter:string"), Value: "a = 1"},
		&Described{Descriptor: uint64(0x13700000001), Value: Map{}},
	}
	for _, v := range values {
		b, err := Marshal(v)
		if err != nil {
			t.Fatalf("Marshal(%#v): %v", v, err)
		}
		got, rest, err := Unmarshal(b)
		if err != nil || len(rest) != 0 {
			t.Fatalf("Unmarshal(Marshal(%#v)) = %v, rest % x", v, err, rest)
		}
		if !reflect.DeepEqual(got, v) && !(v == nil && got == nil) {
			// []any(nil) and Array(nil) decode as empty; compare re-encodings instead.
			b2, _ := Marshal(got)
			if !bytes.Equal(b, b2) {
				t.Fatalf("round trip of %#v gave %#v", v, got)
			}
		}
	}
}

func TestMarshalUnsupported(t *testing.T) {
	tests := []any{
		1, uint(1), struct{}{}, map[string]any{}, []string{"a"},
		Array{uint32(1), uint64(1)},
		Array{"a", Symbol("b")},
		Array{&Described{uint64(1), nil}, &Described{uint64(2), nil}},
		Array{[]any{}, Map{}},
		make(Array, maxZeroWidthElems+1),
		&Described{Descriptor: "string descriptor", Value: nil},
		[]any{1},
		Map{{"k", 1}},
		&Properties{MessageID: int64(1)},
	}
	for _, v := range tests {
		b, err := AppendValue([]byte{1, 2}, v)
		if !errors.Is(err, ErrUnsupportedType) {
			t.Errorf("Marshal(%#v) error = %v, want ErrUnsupportedType", v, err)
		}
		if !bytes.Equal(b, []byte{1, 2}) {
			t.Errorf("Marshal(%#v) changed dst: % x", v, b)
		}
	}
}

func TestMapGetSet(t *testing.T) {
	m := Map{{Symbol("a"), 1}, {"a", 2}, {[]byte("b"), 3}, {[]any{}, 4}, {Described{uint64(1), []any{"x"}}, 7}}
	tests := []struct {
		key  any
		want any
		ok   bool
	}{
		{Symbol("a"), 1, true},
		{"a", 2, true},
		{[]byte("b"), 3, true},
		{[]any{}, 4, true},
		{Described{uint64(1), []any{"x"}}, 7, true},
		{Described{uint64(1), []any{"y"}}, nil, false},
		{Described{uint64(1), Map{}}, nil, false},
		{"b", nil, false},
		{nil, nil, false},
		{uint64(1), nil, false},
	}
	for _, tt := range tests {
		got, ok := m.Get(tt.key)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Get(%#v) = %v, %v; want %v, %v", tt.key, got, ok, tt.want, tt.ok)
		}
	}
	m = m.Set("a", 5).Set("new", 6)
	if v, _ := m.Get("a"); v != 5 {
		t.Errorf("Set existing: %v", v)
	}
	if v, _ := m.Get("new"); v != 6 || len(m) != 6 {
		t.Errorf("Set new: %v, len %d", v, len(m))
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	if got, want := u.String(), "12345678-9abc-def0-0123-456789abcdef"; got != want {
		t.Fatalf("String() = %s, want %s", got, want)
	}
}
