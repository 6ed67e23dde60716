package explorer

import (
	"errors"
	"mime"
	"net/http"
)

// HeaderName is the request header every action (a POST of the JSON API) must carry,
// with the value "1"; the page's script sends it.
//
// Why it protects against cross-site requests: a page of another origin can make a
// browser send a form POST (no custom header, and a form's content types are
// application/x-www-form-urlencoded, multipart/form-data or text/plain), or a fetch. A
// fetch with a header that is not CORS-safelisted, or with the content type
// application/json, is not a "simple" request: the browser first sends a CORS
// preflight (OPTIONS) and sends the POST only when the answer allows it (Fetch
// Standard, "CORS-preflight fetch", https://fetch.spec.whatwg.org/#cors-preflight-fetch,
// and "CORS-safelisted request-header"). The handler answers no preflight and sets no
// Access-Control-Allow-* header, so such a POST never leaves the browser. This is the
// "custom request headers" defence of OWASP's Cross-Site Request Forgery Prevention
// Cheat Sheet
// (https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html),
// and net/http's CrossOriginProtection (Sec-Fetch-Site, else Origin against Host)
// refuses a cross-origin POST first, as that sheet's "Fetch Metadata" section
// describes. Clients that are not browsers (curl, tests) send the header themselves;
// the API is as open to them as the administration API is.
const HeaderName = "X-Sbkit-Explorer"

// errCrossSite is the answer to an action that is not provably same-origin.
var errCrossSite = errors.New("explorer: actions need a same-origin POST with Content-Type application/json and the " + HeaderName + ": 1 header")

// crossOrigin refuses cross-origin browser requests by their Fetch metadata or Origin.
var crossOrigin = http.NewCrossOriginProtection()

// checkAction returns why r may not run an action, or nil.
func checkAction(r *http.Request) error {
	if r.Method != http.MethodPost {
		return &apiError{status: http.StatusMethodNotAllowed, msg: "actions are POSTs"}
	}
	if err := crossOrigin.Check(r); err != nil {
		return &apiError{status: http.StatusForbidden, msg: errCrossSite.Error() + ": " + err.Error()}
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Header.Get(HeaderName) != "1" || err != nil || mt != "application/json" {
		return &apiError{status: http.StatusForbidden, msg: errCrossSite.Error()}
	}
	return nil
}
