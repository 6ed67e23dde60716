package sbtest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzAdminRequest sends arbitrary methods, paths, headers and bodies to the admin API's
// handler: it must answer every one (no panic) with a status the SDK understands, and
// leave the namespace usable.
func FuzzAdminRequest(f *testing.F) {
	rule := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><RuleDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><Filter xmlns:i="http://www.w3.org/2001/XMLSchema-instance" i:type="SqlFilter"><SqlExpression>a = 1</SqlExpression></Filter></RuleDescription></content></entry>`
	queue := `<entry xmlns="http://www.w3.org/2005/Atom"><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"><LockDuration>PT30S</LockDuration><ForwardTo>q</ForwardTo></QueueDescription></content></entry>`
	f.Add("PUT", "/t/Subscriptions/s/Rules/r", "", rule)
	f.Add("PUT", "/q2", "*", queue)
	f.Add("GET", "/$Resources/Queues?$skip=1&$top=1", "", "")
	f.Add("DELETE", "/t/Subscriptions/s", "", "")
	f.Add("GET", "/t/Subscriptions/s/Rules/", "", "")
	srv := NewTestServer(f, &ServerOptions{
		Queues: map[string]*EntityOptions{"q": nil},
		Topics: map[string]TopicOptions{"t": {Subscriptions: map[string]*EntityOptions{"s": nil}}},
	})
	f.Fuzz(func(t *testing.T, method, path, ifMatch, body string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "https://sbtest"+path, strings.NewReader(body))
		if err != nil {
			return
		}
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		rec := httptest.NewRecorder()
		srv.w.AdminAPI().ServeHTTP(rec, req)
		if rec.Code < 200 || rec.Code >= 500 {
			t.Fatalf("%s %s: status %d: %s", method, path, rec.Code, rec.Body.String())
		}
	})
}
