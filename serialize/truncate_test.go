package serialize

import "testing"

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", -1, "hello"},
		{"hello", 0, ""},
		{"hello", 5, "hello"},
		{"hello world", 8, "hello..."},
		{"hello", 2, ".."},
		{"héllo wörld", 5, "h..."}, // é is 2 bytes: cutting at 2 would split it
		{"日本語テキスト", 10, "日本..."},   // 3-byte runes
		{"\xff\xff\xff\xff\xff\xff\xff\xff", 6, "\xff\xff\xff..."},
	}
	for _, tt := range tests {
		got := truncate(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if tt.max >= 0 && len(got) > tt.max {
			t.Errorf("truncate(%q, %d) is %d bytes", tt.in, tt.max, len(got))
		}
	}
}
