package amqp

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestUnmarshalMalformed feeds broken input: every case must fail with ErrMalformed, not
// panic, and leave nothing decoded.
func TestUnmarshalMalformed(t *testing.T) {
	tests := []struct {
		name, in string
	}{
		{"empty", ""},
		{"unknown constructor", "ff"},
		{"reserved constructor", "57"},
		{"bool byte 2", "56 02"},
		{"truncated ubyte", "50"},
		{"truncated ushort", "60 01"},
		{"truncated uint", "70 00 00 00"},
		{"truncated ulong", "80 00 00 00 00 00 00 00"},
		{"truncated uuid", "98 00"},
		{"truncated decimal128", "94 00"},
		{"truncated timestamp", "83 00"},
		{"vbin8 too long", "a0 02 61"},
		{"vbin32 huge", "b0 ff ff ff ff 61"},
		{"str32 huge", "b1 7f ff ff ff"},
		{"sym8 no size", "a3"},
		{"list8 no size", "c0"},
		{"list8 size 0", "c0 00"},
		{"list8 size beyond input", "c0 05 01 40"},
		{"list8 count beyond size", "c0 02 05 40"},
		{"list8 trailing bytes", "c0 03 01 40 40"},
		{"list8 element truncated", "c0 02 01 70"},
		{"list32 size below count", "d0 00 00 00 03 00 00 00"},
		{"list32 huge count", "d0 00 00 00 05 ff ff ff ff 40"},
		{"list32 huge size", "d0 ff ff ff ff 00 00 00 01 40"},
		{"map odd count", "c1 03 01 40 40"},
		{"map count beyond size", "c1 03 04 40 40"},
		{"map32 huge count", "d1 00 00 00 06 ff ff ff fe 40 40"},
		{"map trailing bytes", "c1 04 02 40 40 40"},
		{"array8 no constructor", "e0 01 01"},
		{"array8 count beyond bytes", "e0 03 05 50 01"},
		{"array32 huge count", "f0 00 00 00 06 ff ff ff ff 50 01"},
		{"array of nulls beyond limit", "e0 02 11 40"},
		{"array32 of uint0 huge count", "f0 00 00 00 05 7f ff ff ff 43"},
		{"array element truncated", "e0 04 02 70 00 00"},
		{"array trailing bytes", "e0 04 01 50 01 02"},
		{"array unknown element constructor", "e0 03 01 ff 00"},
		{"array element described bad descriptor", "e0 05 01 00 a1 00 40"},
		{"described no descriptor", "00"},
		{"described string descriptor", "00 a1 01 61 40"},
		{"described list descriptor", "00 45 40"},
		{"described no value", "00 53 01"},
		{"described value truncated", "00 53 01 70"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := hx(t, tt.in)
			v, _, err := Unmarshal(in)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal(% x) = %#v, %v; want ErrMalformed", in, v, err)
			}
			if v != nil {
				t.Fatalf("Unmarshal returned %#v with an error", v)
			}
		})
	}
}

// TestUnmarshalDepthLimit nests lists, maps, arrays and described values beyond MaxDepth:
// the decoder must refuse them (and not overflow the stack on far deeper input), while
// MaxDepth levels still decode.
func TestUnmarshalDepthLimit(t *testing.T) {
	nestList := func(levels int) []byte {
		// list32 inside list32 ...: d0 size 00000001 <inner>, innermost list0.
		b := make([]byte, 0, 9*levels+1)
		for i := range levels {
			size := 4 + 1 + 9*(levels-1-i)
			b = append(b, tcList32, byte(size>>24), byte(size>>16), byte(size>>8), byte(size), 0, 0, 0, 1)
		}
		return append(b, tcList0)
	}
	tests := []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"lists at the limit", nestList(MaxDepth - 1), true},
		{"lists beyond the limit", nestList(MaxDepth + 1), false},
		{"lists far beyond the limit", nestList(100000), false},
		{"described chain", append(bytes.Repeat([]byte{0x00, 0x53, 0x01}, 100000), tcNull), false},
		{"described descriptors", append(bytes.Repeat([]byte{0x00}, 100000), 0x53, 0x01, tcNull), false},
		{"array element described chain", append([]byte{tcArray32, 0, 0x0f, 0xff, 0xff, 0, 0, 0, 1}, bytes.Repeat([]byte{0x00, 0x53, 0x01}, 0x5555)...), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Unmarshal(tt.in)
			if tt.ok && err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if !tt.ok && !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unmarshal error = %v, want ErrMalformed", err)
			}
			if !tt.ok && err != nil && !strings.Contains(err.Error(), "nesting") && tt.name != "array element described chain" {
				t.Fatalf("error %q does not mention nesting", err)
			}
		})
	}
}

// TestUnmarshalAllocationBound checks that lengths and counts from the input never size an
// allocation beyond the input: a 9-byte list32 that announces 2^32-1 elements must fail
// without allocating gigabytes.
func TestUnmarshalAllocationBound(t *testing.T) {
	inputs := [][]byte{
		hx(t, "d0 00 00 00 05 ff ff ff ff 40"),
		hx(t, "f0 00 00 00 05 ff ff ff ff 50"),
		hx(t, "d1 00 00 00 05 ff ff ff fe 40"),
		hx(t, "b0 ff ff ff ff"),
	}
	for _, in := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const runs = 100
		for range runs {
			if _, _, err := Unmarshal(in); err == nil {
				t.Fatalf("Unmarshal(% x) succeeded", in)
			}
		}
		runtime.ReadMemStats(&after)
		// An error value takes a few hundred bytes; no element slice or buffer is made
		// (one would be gigabytes).
		if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 4096 {
			t.Errorf("Unmarshal(% x): %d bytes allocated per call", in, perRun)
		}
	}
}

// TestUnmarshalRest decodes a sequence of values one at a time.
func TestUnmarshalRest(t *testing.T) {
	in := hx(t, "41 52 07 a1 01 61")
	var got []any
	for len(in) > 0 {
		v, rest, err := Unmarshal(in)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
		in = rest
	}
	if len(got) != 3 || got[0] != true || got[1] != uint32(7) || got[2] != "a" {
		t.Fatalf("got %#v", got)
	}
}
