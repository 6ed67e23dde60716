package wire

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/amqp"
)

// Shared access signature authorization, when ServerOptions.SASKeys names keys, as the
// service checks it ("Service Bus access control with Shared Access Signatures",
// learn.microsoft.com/azure/service-bus-messaging/service-bus-sas): a token is
// "SharedAccessSignature sr=<URL-encoded resource>&sig=<signature>&se=<expiry>&skn=<key
// name>", its signature the Base64 HMAC-SHA256, with the named key, of the URL-encoded
// resource, a line feed and the expiry (seconds since 1970), and it grants the resource
// and everything under it until the expiry. AMQP clients put tokens on $cbs and a link
// needs a token that covers its entity; the administration API reads the Authorization
// header of each request.

// sasSignature is the signature of a token for the URL-encoded resource sr until the
// expiry se (seconds since 1970, in decimal): the HMAC-SHA256 of sr, a line feed and se,
// with key.
func sasSignature(key, sr, se string) []byte {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte(sr + "\n" + se))
	return h.Sum(nil)
}

// SignSAS makes a token for resource as the SDKs do (the resource URL-encoded in lower
// case), signed by the key named name until expiry (seconds since 1970): for the tests
// of this package and of sbtest, which need tokens the SDKs would not make (a wrong key,
// another resource, an expiry past).
func SignSAS(name, key, resource string, expiry int64) string {
	sr := strings.ToLower(url.QueryEscape(resource))
	se := strconv.FormatInt(expiry, 10)
	sig := url.QueryEscape(base64.StdEncoding.EncodeToString(sasSignature(key, sr, se)))
	return "SharedAccessSignature sr=" + sr + "&sig=" + sig + "&se=" + se + "&skn=" + name
}

// errSAS is why a token was refused.
var errSAS = errors.New("sbtest: invalid shared access signature")

// sasGrant is what a valid token grants: the entity path prefix it covers (lower case,
// "" for the whole namespace) until its expiry.
type sasGrant struct {
	path  string
	until time.Time
}

// verifySAS checks token against keys (name -> key) at now and returns its grant.
func verifySAS(keys map[string]string, token string, now time.Time) (sasGrant, error) {
	fields, ok := strings.CutPrefix(strings.TrimSpace(token), "SharedAccessSignature ")
	if !ok {
		return sasGrant{}, fmt.Errorf("%w: not a SharedAccessSignature token", errSAS)
	}
	raw := map[string]string{}
	for _, kv := range strings.Split(fields, "&") {
		k, v, _ := strings.Cut(kv, "=")
		raw[k] = v
	}
	key, ok := keys[raw["skn"]]
	if !ok {
		return sasGrant{}, fmt.Errorf("%w: unknown key name %q", errSAS, raw["skn"])
	}
	se, err := strconv.ParseInt(raw["se"], 10, 64)
	if err != nil {
		return sasGrant{}, fmt.Errorf("%w: expiry %q", errSAS, raw["se"])
	}
	until := time.Unix(se, 0)
	if !now.Before(until) {
		return sasGrant{}, fmt.Errorf("%w: the token expired at %s", errSAS, until.UTC().Format(time.RFC3339))
	}
	sig, err := url.QueryUnescape(raw["sig"])
	if err != nil {
		return sasGrant{}, fmt.Errorf("%w: signature %q", errSAS, raw["sig"])
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return sasGrant{}, fmt.Errorf("%w: signature %q", errSAS, raw["sig"])
	}
	if !hmac.Equal(got, sasSignature(key, raw["sr"], raw["se"])) {
		return sasGrant{}, fmt.Errorf("%w: the signature does not match key %q", errSAS, raw["skn"])
	}
	resource, err := url.QueryUnescape(raw["sr"])
	if err != nil {
		return sasGrant{}, fmt.Errorf("%w: resource %q", errSAS, raw["sr"])
	}
	return sasGrant{path: resourcePath(resource), until: until}, nil
}

// resourcePath returns the entity path of a token's resource or audience, lower case and
// without scheme, host, query and slashes at the ends: "sb://host/q/" is "q".
func resourcePath(resource string) string {
	if _, rest, ok := strings.Cut(resource, "://"); ok {
		resource = rest
	}
	_, path, _ := strings.Cut(resource, "/")
	path, _, _ = strings.Cut(path, "?")
	return strings.ToLower(strings.Trim(path, "/"))
}

// covers reports whether g grants path (an entity path, in any letter case) at now.
func (g sasGrant) covers(path string, now time.Time) bool {
	path = strings.ToLower(strings.Trim(path, "/"))
	return now.Before(g.until) && (g.path == "" || path == g.path || strings.HasPrefix(path, g.path+"/"))
}

// maxGrants bounds the tokens one connection keeps: the SDKs put one per entity and
// renew it in place.
const maxGrants = 256

// grant records g for c, the token put on $cbs for audience; a token for the same
// resource replaces the earlier one.
func (c *srvConn) grant(g sasGrant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	c.grants = slices.DeleteFunc(c.grants, func(o sasGrant) bool { return o.path == g.path || !now.Before(o.until) })
	if len(c.grants) >= maxGrants {
		c.grants = c.grants[1:]
	}
	c.grants = append(c.grants, g)
}

// authorize returns amqp:unauthorized-access unless authorization is off or c holds a
// token that covers the entity at addr, as the service refuses a link without one.
func (c *srvConn) authorize(addr string) *amqp.Error {
	if len(c.srv.sasKeys) == 0 {
		return nil
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.grants {
		if g.covers(addr, now) {
			return nil
		}
	}
	return protoError(condUnauthorized, "Unauthorized access: no valid token on $cbs covers '%s'.", addr)
}

// coveredUntil returns when the last of c's tokens that cover addr at now expires, and
// false when none does.
func (c *srvConn) coveredUntil(addr string, now time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var until time.Time
	for _, g := range c.grants {
		if g.covers(addr, now) && g.until.After(until) {
			until = g.until
		}
	}
	return until, !until.IsZero()
}

// watchToken detaches l with amqp:unauthorized-access once no token the client put on
// $cbs covers its entity any more: "When a token expires, Service Bus promptly drops all
// links on the connection to the respective entity"
// (learn.microsoft.com/azure/service-bus-messaging/service-bus-amqp-protocol-guide,
// "Token renewal"). A token put for the entity meanwhile (the SDKs renew theirs before
// they expire) keeps the link. It costs a timer, stopped with the link; $cbs links and
// a server without SASKeys have none.
func watchToken(l link) {
	b := l.base()
	c := b.s.c
	if len(c.srv.sasKeys) == 0 || b.addr == cbsNode {
		return
	}
	var mu sync.Mutex
	var t *time.Timer
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if b.ctx.Err() != nil {
			return
		}
		until, ok := c.coveredUntil(b.addr, time.Now())
		if !ok {
			detachWithError(l, protoError(condUnauthorized, "Unauthorized access: the token for '%s' expired and no other covers it.", b.addr))
			return
		}
		t.Reset(time.Until(until))
	}
	until, _ := c.coveredUntil(b.addr, time.Now()) // zero (fire at once) when none covers it
	mu.Lock()
	t = time.AfterFunc(time.Until(until), check)
	mu.Unlock()
	context.AfterFunc(b.ctx, func() {
		mu.Lock() // after a check that saw the link open and re-armed t, not during it
		defer mu.Unlock()
		t.Stop()
	})
}

// authorizeHTTP serves next only for a request whose Authorization header carries a
// token that covers its path, when authorization is on; GET /health needs none. A
// refused request gets 401, as from the service.
func (s *Server) authorizeHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.sasKeys) == 0 || r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		g, err := verifySAS(s.sasKeys, r.Header.Get("Authorization"), time.Now())
		if err == nil && !g.covers(r.URL.Path, time.Now()) {
			err = fmt.Errorf("%w: the token's resource does not cover %s", errSAS, r.URL.Path)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/xml; charset=utf-8")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "<Error><Code>401</Code><Detail>%s</Detail></Error>", xmlText(err.Error()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// xmlText escapes s for an XML text node.
func xmlText(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
