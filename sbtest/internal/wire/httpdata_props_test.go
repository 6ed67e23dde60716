package wire

import (
	"testing"
)

func TestLockTokenGUID(t *testing.T) {
	tok := [16]byte{0x3d, 0x2c, 0x1b, 0x0a, 0x5f, 0x4e, 0x6b, 0x4a, 0x8c, 0x7d, 0x8e, 0x9f, 0xa0, 0xb1, 0xc2, 0xd3}
	s := formatLockToken(tok)
	if s != "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3" {
		t.Fatalf("formatLockToken = %s", s)
	}
	if back, ok := parseLockToken(s); !ok || back != tok {
		t.Fatalf("parseLockToken(%s) = %x, %v", s, back, ok)
	}
	for _, bad := range []string{"", "0a1b2c3d4e5f4a6b8c7d8e9fa0b1c2d3", "0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2dz"} {
		if _, ok := parseLockToken(bad); ok {
			t.Errorf("parseLockToken(%q) accepted", bad)
		}
	}
}
