package admin

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/atom"
)

// MaxBody bounds a request body; entity descriptions are a few KiB.
const MaxBody = 1 << 20

// Handler serves the administration API for a Model (ServeHTTP). Safe for concurrent
// use.
type Handler struct {
	model Model

	// creating serializes the creates, so that a quota's check and the create it allows
	// are one step (entityQuota, the subscriptions' quota).
	creating sync.Mutex

	mu      sync.Mutex
	meta    map[string]*meta // what the API was told about each entity, by path
	pruneAt int              // len(meta) at which metaLocked prunes the deleted entities' metadata
}

// New returns a Handler for m.
func New(m Model) *Handler {
	return &Handler{model: m, meta: make(map[string]*meta), pruneAt: minPruneAt}
}

// minPruneAt is the fewest entries of Handler.meta that make a new one prune it.
const minPruneAt = 64

// Kept returns how many entities the handler keeps a description of: the entities
// that exist once a PUT or DELETE has pruned the deleted ones, and between prunes at
// most twice as many as after the last one (or 64). What it keeps of a deleted entity
// never holds the entity itself (Entity.ID).
func (a *Handler) Kept() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.meta)
}

// meta is what the admin API keeps about one entity beyond the model's options:
// the description last PUT (for the properties sbtest accepts and reports back) and the
// times. id is the ID of the Entity or Topic it belongs to, so that an entity deleted
// and created again in memory does not inherit it, and a deleted one is not kept alive.
type meta struct {
	id    any
	topic bool
	// desc is a copy of the description last PUT: an *atom.QueueDescription,
	// *atom.TopicDescription or *atom.SubscriptionDescription (nil before the first PUT).
	desc             any
	created, updated time.Time
}

// httpError is a failed request: an HTTP status and the service's detail text.
type httpError struct {
	status int
	detail string
}

func (e *httpError) Error() string { return e.detail }

// httpErr is an *httpError with the status and the formatted detail.
func httpErr(status int, format string, args ...any) *httpError {
	return &httpError{status: status, detail: fmt.Sprintf(format, args...)}
}

// notFound is the service's answer about an entity or rule at path that does not exist.
func notFound(path string) error {
	return httpErr(http.StatusNotFound, "The messaging entity '%s' could not be found.", path)
}

// methodNotAllowed refuses r's method on a path that exists.
func methodNotAllowed(r *http.Request) error {
	return httpErr(http.StatusMethodNotAllowed, "method %s not allowed", r.Method)
}

// httpStatus maps the model's errors to the service's statuses: 404 not found (the SDK's
// mapATOMError turns it into nil, nil; SDK live tests TestAdminClient_NotFound and
// TestAdminClient_UpdateQueue), 409 conflict (already exists), 400 for invalid values.
func httpStatus(err error) *httpError {
	var ae *httpError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, ErrNotFound):
		return httpErr(http.StatusNotFound, "%v. TrackingId:sbtest", err)
	case errors.Is(err, ErrExists):
		return httpErr(http.StatusConflict, "SubCode=40900. Conflict. You're requesting an operation that isn't allowed in the resource's current state. %v", err)
	default:
		return httpErr(http.StatusBadRequest, "SubCode=40000. %v", err)
	}
}

// ServeHTTP routes the administration API (paths as the SDK's admin client builds them):
//
//	/$namespaceinfo                      GET
//	/$Resources/Queues, /$Resources/Topics  GET (list, $skip and $top)
//	/{queue or topic}                    GET, PUT (create; update with If-Match), DELETE
//	/{topic}/Subscriptions               GET (list)
//	/{topic}/Subscriptions/{sub}         GET, PUT, DELETE
//	/{topic}/Subscriptions/{sub}/Rules/  GET (list)
//	/{topic}/Subscriptions/{sub}/Rules/{rule}  GET, PUT, DELETE
//	/health (without api-version)        GET (health.go)
//
// The handler does not read Authorization headers: the server checks them before it,
// when shared access keys are configured (sbtest.ServerOptions.SASKeys).
func (a *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isHealthCheck(r) {
		serveHealth(w, r)
		return
	}
	doc, status, err := a.serve(r)
	if err != nil {
		ae := httpStatus(err)
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(ae.status)
		_ = xml.NewEncoder(w).Encode(atom.Error{Code: ae.status, Detail: ae.detail})
		return
	}
	w.Header().Set("Content-Type", "application/atom+xml;type=entry;charset=utf-8")
	w.WriteHeader(status)
	if doc != nil {
		_, _ = io.WriteString(w, xml.Header)
		_ = xml.NewEncoder(w).Encode(doc)
	}
}

// serve routes r (see ServeHTTP) and returns the document to answer with (nil for
// none) and the HTTP status, or an error that httpStatus maps to one.
func (a *Handler) serve(r *http.Request) (doc any, status int, err error) {
	path := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(path, "/")
	switch {
	case strings.EqualFold(path, "$namespaceinfo") && r.Method == http.MethodGet:
		return a.namespaceInfo(r), http.StatusOK, nil
	case len(parts) == 2 && strings.EqualFold(parts[0], "$Resources"):
		if r.Method != http.MethodGet {
			return nil, 0, methodNotAllowed(r)
		}
		skip, top := paging(r)
		switch {
		case strings.EqualFold(parts[1], "Queues"):
			return a.listQueues(r, skip, top), http.StatusOK, nil
		case strings.EqualFold(parts[1], "Topics"):
			return a.listTopics(r, skip, top), http.StatusOK, nil
		}
		return nil, 0, httpErr(http.StatusNotFound, "unknown resource collection %q", parts[1])
	}
	// A topic name may hold slashes: the first "Subscriptions" segment after the first
	// ends it.
	subs := -1
	for i, p := range parts {
		if i > 0 && strings.EqualFold(p, "Subscriptions") {
			subs = i
			break
		}
	}
	if subs < 0 {
		return a.queueOrTopic(r, path)
	}
	topic := strings.Join(parts[:subs], "/")
	rest := parts[subs+1:] // {sub} [Rules [{rule}]]; path has no trailing slash
	switch {
	case len(rest) == 0 && r.Method == http.MethodGet:
		skip, top := paging(r)
		return a.listSubscriptions(r, topic, skip, top)
	case len(rest) == 1:
		return a.subscription(r, topic, rest[0])
	case len(rest) == 2 && strings.EqualFold(rest[1], "Rules"):
		if r.Method != http.MethodGet {
			return nil, 0, methodNotAllowed(r)
		}
		skip, top := paging(r)
		return a.listRules(r, topic, rest[0], skip, top)
	case len(rest) == 3 && strings.EqualFold(rest[1], "Rules"):
		return a.rule(r, topic, rest[0], rest[2])
	}
	return nil, 0, httpErr(http.StatusNotFound, "no such resource %q", r.URL.Path)
}

// paging reads $skip and $top; the SDK sends them in a query that may start with "?&"
// (admin_client.go entityPager; a short page ends its listing).
func paging(r *http.Request) (skip, top int) {
	top = 100
	for k, vs := range r.URL.Query() {
		k = strings.TrimPrefix(k, "?")
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 0 {
			continue
		}
		switch k {
		case "$skip":
			skip = n
		case "$top":
			if n > 0 {
				top = n
			}
		}
	}
	return skip, top
}

// page returns the top items after the first skip.
func page[T any](items []T, skip, top int) []T {
	if skip >= len(items) {
		return nil
	}
	items = items[skip:]
	if len(items) > top {
		items = items[:top]
	}
	return items
}

// readEntry decodes a PUT body.
func readEntry(r *http.Request) (*atom.Entry, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, httpErr(http.StatusBadRequest, "reading the request: %v", err)
	}
	if len(body) > MaxBody {
		return nil, httpErr(http.StatusRequestEntityTooLarge, "request body over %d bytes", MaxBody)
	}
	var e atom.Entry
	if err := xml.Unmarshal(body, &e); err != nil {
		return nil, httpErr(http.StatusBadRequest, "SubCode=40000. The request body is not a valid Atom entry: %v", err)
	}
	return &e, nil
}

// isUpdate tells a create PUT from an update PUT: the SDK sends If-Match: * to update.
func isUpdate(r *http.Request) bool { return r.Header.Get("If-Match") != "" }

// putTarget is what a PUT creates or updates: an Entity (a queue or a subscription) or
// a Topic.
type putTarget interface {
	SetOptions(opts *Options) error
	SetStatus(s string) error
}

// createOrUpdate does what a PUT of the kind ("Queue", "Topic", "Subscription") at path
// asks. An update gives the object find returns the options o (404 when there is none;
// the RequiresSession of a queue or subscription cannot change); a create makes the
// object with create. Then status (the Status property, validated by checkReported)
// applies. It returns the object and the HTTP status: 200 updated, 201 created.
func createOrUpdate[T putTarget](r *http.Request, kind, path string, o *Options, status *string,
	find func() (T, bool), create func() (T, error)) (T, int, error) {
	var zero T
	obj, code := zero, http.StatusCreated
	if isUpdate(r) {
		cur, ok := find()
		if !ok {
			return zero, 0, httpErr(http.StatusNotFound, "The messaging entity '%s' could not be found. 404 Not Found", path)
		}
		if e, isEntity := any(cur).(Entity); isEntity && o.RequiresSession != e.Options().RequiresSession {
			return zero, 0, bad("The value for the RequiresSession property of an existing %s cannot be changed.", kind)
		}
		if err := cur.SetOptions(o); err != nil {
			return zero, 0, err
		}
		obj, code = cur, http.StatusOK
	} else {
		var err error
		if obj, err = create(); err != nil {
			return zero, 0, err
		}
	}
	if err := obj.SetStatus(statusOf(status)); err != nil {
		return zero, 0, err
	}
	return obj, code, nil
}

// stamp formats t as the service writes times.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// entry wraps one description as the service does.
func (a *Handler) entry(r *http.Request, path, name string, c atom.Content) *atom.Entry {
	c.Type = "application/xml"
	url := "https://" + r.Host + "/" + path
	return &atom.Entry{
		ID:      url,
		Title:   &atom.Title{Type: "text", Text: name},
		Updated: stamp(time.Now()),
		Link:    &atom.Link{Rel: "self", HREF: url},
		Content: c,
	}
}

// feed wraps the entries of a listing as the service does.
func (a *Handler) feed(r *http.Request, title string, entries []atom.Entry) *atom.Feed {
	return &atom.Feed{
		ID:      "https://" + r.Host + r.URL.Path,
		Title:   atom.Title{Type: "text", Text: title},
		Updated: stamp(time.Now()),
		Entries: entries,
	}
}

// namespaceInfo serves /$namespaceinfo: a Standard namespace called sbtest.
func (a *Handler) namespaceInfo(r *http.Request) *atom.Entry {
	now := stamp(time.Now())
	return a.entry(r, "$namespaceinfo", "sbtest", atom.Content{Namespace: &atom.NamespaceInfo{
		CreatedTime: now, ModifiedTime: now, MessagingSKU: "Standard", Name: "sbtest", NamespaceType: "Messaging",
	}})
}

// metaFor returns a copy of the admin metadata of obj at path, creating it (with the
// current time) when there is none or it belongs to an object deleted since.
func (a *Handler) metaFor(path string, obj any) meta {
	a.mu.Lock()
	defer a.mu.Unlock()
	return *a.metaLocked(path, obj)
}

// metaLocked is metaFor's map lookup; it returns the stored metadata, to change in
// place. Called with a.mu held.
// A new entry prunes the entries of deleted entities first once there are twice as many
// as after the last prune, so that entities created and deleted in the model, which
// the API does not see go, cost it amortized O(1) and bounded memory.
func (a *Handler) metaLocked(path string, obj any) *meta {
	id, topic := idOf(obj)
	m := a.meta[path]
	if m == nil || m.id != id {
		if m == nil && len(a.meta) >= a.pruneAt {
			a.pruneLocked()
		}
		now := time.Now()
		m = &meta{id: id, topic: topic, created: now, updated: now}
		a.meta[path] = m
	}
	return m
}

// idOf returns the ID of obj, an Entity or a Topic, and whether it is a Topic.
func idOf(obj any) (any, bool) {
	switch o := obj.(type) {
	case Topic:
		return o.ID(), true
	case Entity:
		return o.ID(), false
	}
	panic(fmt.Sprintf("admin: metadata of a %T", obj))
}

// remember records desc, a copy of the description a PUT gave obj at path, and forgets
// the entities deleted since.
func (a *Handler) remember(path string, obj, desc any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked()
	m := a.metaLocked(path, obj)
	m.desc = desc
	m.updated = time.Now()
}

// prune forgets what the admin API kept about entities deleted since (through it or in
// the model), so that what it keeps is bounded by the entities that exist.
func (a *Handler) prune() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pruneLocked()
}

// pruneLocked is prune with a.mu held.
func (a *Handler) pruneLocked() {
	for path, m := range a.meta {
		var live any
		if m.topic {
			if t, ok := a.model.Topic(path); ok {
				live = t.ID()
			}
		} else if e, ok := a.entityAt(path); ok {
			live = e.ID()
		}
		if live != m.id {
			delete(a.meta, path)
		}
	}
	a.pruneAt = max(2*len(a.meta), minPruneAt)
}

// entityAt returns the queue or subscription at path: "queue" or
// "topic/Subscriptions/sub".
func (a *Handler) entityAt(path string) (Entity, bool) {
	topic, sub, ok := strings.Cut(path, subscriptionsSegment)
	if !ok {
		return a.model.Queue(path)
	}
	t, ok := a.model.Topic(topic)
	if !ok {
		return nil, false
	}
	return t.Subscription(sub)
}

// subscriptionsSegment joins a topic's name and a subscription's in a path.
const subscriptionsSegment = "/Subscriptions/"

// subscriptionPath is the path of the subscription sub of topic.
func subscriptionPath(topic, sub string) string { return topic + subscriptionsSegment + sub }

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// lastPut returns a copy of the description of obj at path that remember recorded (the
// zero D before the first PUT) and obj's metadata, for describing obj.
func lastPut[D any](a *Handler, path string, obj any) (D, meta) {
	m := a.metaFor(path, obj)
	var d D
	if p, ok := m.desc.(*D); ok {
		d = *p
	}
	return d, m
}
