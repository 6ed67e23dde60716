package scenario

import (
	"strings"
	"testing"
	"time"
)

func TestParseISODuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"PT1M", time.Minute, false},
		{"PT30S", 30 * time.Second, false},
		{"PT0.5S", 500 * time.Millisecond, false},
		{"P0DT0H1M0S", time.Minute, false},
		{"PT5M", 5 * time.Minute, false},
		{"P14D", 14 * 24 * time.Hour, false},
		{"P1DT2H", 26 * time.Hour, false},
		{"1M", 0, true},
		{"P1M", 0, true}, // months are not durations the API uses for locks
		{"PTxS", 0, true},
		{"PT5", 0, true},
	}
	for _, tc := range tests {
		got, err := parseISODuration(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseISODuration(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNewLive(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	l, err := NewLive(t, env(nil))
	if l != nil || err != nil {
		t.Errorf("unset: %v, %v; want nil, nil", l, err)
	}
	_, err = NewLive(t, env(map[string]string{ConnectionStringEnv: "not a connection string"}))
	if err == nil || !strings.Contains(err.Error(), ConnectionStringEnv) {
		t.Errorf("malformed: %v, want an error naming %s", err, ConnectionStringEnv)
	}
}
