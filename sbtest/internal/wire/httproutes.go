package wire

import "net/http"

// httpRoutes is the handler of every HTTP connection the server serves (the AMQP port
// over TLS, and ServerOptions.AdminHTTPAddr): AMQP over WebSockets at
// /$servicebus/websocket (websocket.go), whose AMQP connection authorizes itself on
// $cbs; then, behind the Authorization check of ServerOptions.SASKeys (authorizeHTTP),
// the runtime (data plane) API's message paths .../messages... (httpdata.go) and
// everything else to admin, the administration API.
func (s *Server) httpRoutes(admin http.Handler) http.Handler {
	authorized := s.authorizeHTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if call, ok := s.isDataRequest(r); ok {
			s.serveData(w, r, call)
			return
		}
		admin.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isWebSocketPath(r.URL.Path) {
			s.serveWebSocket(w, r)
			return
		}
		authorized.ServeHTTP(w, r)
	})
}
