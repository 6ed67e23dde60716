package wire

import (
	"strings"
	"testing"
	"time"
)

// A token is valid with a known key name, its key's signature over the resource and the
// expiry, before the expiry, and for its resource and what is under it.
func TestVerifySAS(t *testing.T) {
	keys := map[string]string{"k": "secret"}
	now := time.Unix(1_000_000, 0)
	later := now.Add(time.Hour).Unix()
	for _, tt := range []struct {
		name, token, path string
		ok                bool
	}{
		{"right", SignSAS("k", "secret", "sb://host/Orders", later), "orders", true},
		{"under the resource", SignSAS("k", "secret", "sb://host/t", later), "T/Subscriptions/s", true},
		{"namespace", SignSAS("k", "secret", "sb://host/", later), "anything", true},
		{"other entity", SignSAS("k", "secret", "sb://host/orders", later), "ordersx", false},
		{"wrong key", SignSAS("k", "nope", "sb://host/orders", later), "orders", false},
		{"unknown name", SignSAS("x", "secret", "sb://host/orders", later), "orders", false},
		{"expired", SignSAS("k", "secret", "sb://host/orders", now.Unix()), "orders", false},
		{"tampered resource", strings.Replace(SignSAS("k", "secret", "sb://host/orders", later), "orders", "admin", 1), "admin", false},
		{"not SAS", "Bearer abc", "orders", false},
	} {
		g, err := verifySAS(keys, tt.token, now)
		if ok := err == nil && g.covers(tt.path, now); ok != tt.ok {
			t.Errorf("%s: valid for %q = %v (%v), want %v", tt.name, tt.path, ok, err, tt.ok)
		}
	}
}
