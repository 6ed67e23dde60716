package explorer

import (
	"embed"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"github.com/sbkit/sbkit/sbtest/internal/admin"
)

// Prefix starts every path of the explorer but the page itself (GET /).
const Prefix = "/$explorer/"

// maxBody bounds the body of an action; a message is at most the namespace's maximum
// message size (256 KiB by default), sent as JSON text.
const maxBody = 4 << 20

//go:embed static
var static embed.FS

// Handler serves the explorer for a Model. Safe for concurrent use.
type Handler struct {
	model  Model
	static http.Handler
	index  []byte // static/index.html
}

// New returns a Handler for m.
func New(m Model) *Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		panic(err)
	}
	return &Handler{model: m, static: http.StripPrefix(Prefix+"static/", http.FileServerFS(sub)), index: index}
}

// Serves reports whether the explorer answers r: GET or HEAD of / and any path under
// Prefix, in each case without the api-version parameter, which the SDKs'
// administration clients send with every request; everything else is the
// administration API's.
func Serves(r *http.Request) bool {
	if r.URL.Query().Has("api-version") {
		return false
	}
	if r.URL.Path == "/" {
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	return strings.HasPrefix(r.URL.Path, Prefix)
}

// IsPage reports whether r, which the explorer Serves, asks for the page or one of its
// files rather than the JSON API: they hold no data, so they are served without
// authorization, and the page asks for a token when the API wants one.
func IsPage(r *http.Request) bool {
	return r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, Prefix+"static/")
}

// ServeHTTP serves the page, its files and the JSON API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page and its answers are never framed by another origin (clickjacking) and
	// never sniffed as another type.
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch p := r.URL.Path; {
	case p == "/":
		// The page itself, not through the file server, which redirects a request
		// for index.html to its directory.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.Method == http.MethodGet {
			_, _ = w.Write(h.index)
		}
	case strings.HasPrefix(p, Prefix+"static/"):
		w.Header().Set("Cache-Control", "no-cache")
		h.static.ServeHTTP(w, r)
	case strings.HasPrefix(p, Prefix+"api/"):
		h.serveAPI(w, r, strings.TrimPrefix(p, Prefix+"api/"))
	default:
		writeError(w, &apiError{status: http.StatusNotFound, msg: "no such explorer path " + p})
	}
}

// serveAPI routes the JSON API: GET namespace, entity and messages (api.go); POST send,
// redrive, purge and delete (send.go, redrive.go, purge.go, delete.go).
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request, name string) {
	var (
		v   any
		err error
	)
	switch name {
	case "namespace", "entity", "messages":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			err = &apiError{status: http.StatusMethodNotAllowed, msg: name + " is read with GET"}
			break
		}
		switch name {
		case "namespace":
			v, err = h.namespace(r)
		case "entity":
			v, err = h.entity(r)
		case "messages":
			v, err = h.messages(r)
		}
	case "send", "redrive", "purge", "delete":
		if err = checkAction(r); err != nil {
			break
		}
		switch name {
		case "send":
			v, err = h.send(r)
		case "redrive":
			v, err = h.redrive(r)
		case "purge":
			v, err = h.purge(r)
		case "delete":
			v, err = h.deleteMessage(r)
		}
	default:
		err = &apiError{status: http.StatusNotFound, msg: "no such API " + name}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// apiError is a failed request: an HTTP status and a message for the page.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// badRequest is a 400 with msg.
func badRequest(msg string) error { return &apiError{status: http.StatusBadRequest, msg: msg} }

// writeError answers err as {"error": "..."} with its status: an *apiError's, 404 for
// the model's not found, 409 for a conflict, else 400 (the model refused a value).
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		status = ae.status
	case errors.Is(err, admin.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, admin.ErrExists):
		status = http.StatusConflict
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// readJSON decodes an action's body into v, refusing unknown fields and trailing data.
func readJSON(r *http.Request, v any) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("reading the request: " + err.Error())
	}
	if len(body) > maxBody {
		return &apiError{status: http.StatusRequestEntityTooLarge, msg: "request body over 4 MiB"}
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the request is not the JSON this action takes: " + err.Error())
	}
	if dec.More() {
		return badRequest("the request has data after its JSON object")
	}
	return nil
}
