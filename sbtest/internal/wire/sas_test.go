package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sign makes a token as the SDKs do: the resource URL-encoded in lower case, signed with
// the expiry.
func sign(name, key, resource string, expiry int64) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := strconv.FormatInt(expiry, 10)
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(sr + "\n" + se))
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(h.Sum(nil)))
	return "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + name
}

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
		{"right", sign("k", "secret", "sb://host/Orders", later), "orders", true},
		{"under the resource", sign("k", "secret", "sb://host/t", later), "T/Subscriptions/s", true},
		{"namespace", sign("k", "secret", "sb://host/", later), "anything", true},
		{"other entity", sign("k", "secret", "sb://host/orders", later), "ordersx", false},
		{"wrong key", sign("k", "nope", "sb://host/orders", later), "orders", false},
		{"unknown name", sign("x", "secret", "sb://host/orders", later), "orders", false},
		{"expired", sign("k", "secret", "sb://host/orders", now.Unix()), "orders", false},
		{"tampered resource", strings.Replace(sign("k", "secret", "sb://host/orders", later), "orders", "admin", 1), "admin", false},
		{"not SAS", "Bearer abc", "orders", false},
	} {
		g, err := verifySAS(keys, tt.token, now)
		if ok := err == nil && g.covers(tt.path, now); ok != tt.ok {
			t.Errorf("%s: valid for %q = %v (%v), want %v", tt.name, tt.path, ok, err, tt.ok)
		}
	}
}
