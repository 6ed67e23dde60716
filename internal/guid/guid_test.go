package guid

import "testing"

func TestFormat(t *testing.T) {
	tests := []struct {
		in   [16]byte
		want string
	}{
		{[16]byte{}, "00000000-0000-0000-0000-000000000000"},
		{[16]byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10},
			"01234567-89ab-cdef-fedc-ba9876543210"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%x) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
