package admin

import (
	"io"
	"net/http"
	"strings"
)

// healthBody is the answer of GET /health while the server serves, as Microsoft's
// Service Bus emulator documents it (HealthCheckApiSchema.md of
// Azure/azure-service-bus-emulator-installer): status 200 and this JSON object.
const healthBody = `{"status":"healthy","message":"Service is healthy."}`

// isHealthCheck reports whether r asks for the health check: GET /health without the
// api-version parameter, which the SDKs' administration clients send with every
// request, so that a queue named "health" stays reachable through them.
func isHealthCheck(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.EqualFold(strings.Trim(r.URL.Path, "/"), "health") && !r.URL.Query().Has("api-version")
}

// serveHealth answers a health check: the server is healthy whenever it answers, since
// it has nothing to wait for (no database, no warm-up).
func serveHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, healthBody)
	}
}
