package explorer

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	sdkadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/admin"
)

// Paging bounds of the JSON API: a namespace page lists at most maxRows entities
// (default defaultRows), a messages page at most maxMessages (default
// defaultMessages), and a messages page filtered by state peeks at most maxScan
// messages before it answers with what it found and where to go on.
const (
	defaultRows     = 100
	maxRows         = 1000
	defaultMessages = 50
	maxMessages     = 500
	maxScan         = 10_000
	peekChunk       = 500
)

// previewBytes is how much of a body a page of messages carries (body=preview, the
// default); a single message is read with body=full.
const previewBytes = 1024

// countsJSON are an entity's message counts.
type countsJSON struct {
	Active     int   `json:"active"`
	Locked     int   `json:"locked"`
	Deferred   int   `json:"deferred"`
	Scheduled  int   `json:"scheduled"`
	DeadLetter int   `json:"deadLetter"`
	Size       int64 `json:"size"`
}

func countsOf(c admin.Counts) *countsJSON {
	return &countsJSON{Active: c.Active, Locked: c.Locked, Deferred: c.Deferred, Scheduled: c.Scheduled, DeadLetter: c.DeadLetter, Size: c.Size}
}

// rowJSON is one entity of the namespace view. Kind is "queue", "topic" or
// "subscription"; a topic has no counts of its own (its subscriptions hold its
// messages) and reports how many subscriptions it has.
type rowJSON struct {
	Kind          string      `json:"kind"`
	Path          string      `json:"path"`
	Topic         string      `json:"topic,omitempty"`
	Name          string      `json:"name"`
	Status        string      `json:"status"`
	Sessions      bool        `json:"requiresSession,omitempty"`
	Counts        *countsJSON `json:"counts,omitempty"`
	Subscriptions *int        `json:"subscriptions,omitempty"`
}

// namespaceJSON is a page of the namespace view: Matched entities pass the filter, of
// Total; Rows are those from Skip on.
type namespaceJSON struct {
	Total   int       `json:"total"`
	Matched int       `json:"matched"`
	Skip    int       `json:"skip"`
	Rows    []rowJSON `json:"rows"`
	Time    time.Time `json:"time"`
}

// entityRef is an entity of the namespace in the view's order, before its counts are
// read.
type entityRef struct {
	kind, path, topic, name string
	entity                  admin.Entity
	t                       admin.Topic
}

// intParam reads the integer parameter name of r, def when absent, bounded by [lo, hi].
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(name + " must be an integer in [" + strconv.FormatInt(lo, 10) + ", " + strconv.FormatInt(hi, 10) + "]")
	}
	return n, nil
}

// namespace serves GET namespace?filter=&skip=&top=: queues by name, then topics by
// name each followed by its subscriptions, those whose path holds filter (any letter
// case), with the counts of the page's entities only.
func (h *Handler) namespace(r *http.Request) (any, error) {
	skip, err := intParam(r, "skip", 0, 0, 1<<31)
	if err != nil {
		return nil, err
	}
	top, err := intParam(r, "top", defaultRows, 1, maxRows)
	if err != nil {
		return nil, err
	}
	filter := strings.ToLower(r.URL.Query().Get("filter"))
	// Only the page's entities are kept; the others are counted.
	var refs []entityRef
	total, matched := 0, 0
	add := func(e entityRef) {
		total++
		if filter != "" && !strings.Contains(strings.ToLower(e.path), filter) {
			return
		}
		if matched >= int(skip) && len(refs) < int(top) {
			refs = append(refs, e)
		}
		matched++
	}
	for _, q := range h.model.Queues() {
		add(entityRef{kind: "queue", path: q.Name(), name: q.Name(), entity: q})
	}
	for _, t := range h.model.Topics() {
		add(entityRef{kind: "topic", path: t.Name(), name: t.Name(), t: t})
		for _, s := range t.Subscriptions() {
			_, sub, _ := strings.Cut(s.Name(), "/Subscriptions/")
			add(entityRef{kind: "subscription", path: s.Name(), topic: t.Name(), name: sub, entity: s})
		}
	}
	out := namespaceJSON{Total: total, Matched: matched, Skip: int(skip), Rows: []rowJSON{}, Time: time.Now().UTC()}
	for _, e := range refs {
		row := rowJSON{Kind: e.kind, Path: e.path, Topic: e.topic, Name: e.name}
		if e.t != nil {
			row.Status = e.t.Status()
			row.Subscriptions = ptr(len(e.t.Subscriptions()))
		} else {
			row.Status = e.entity.Status()
			row.Sessions = e.entity.Options().RequiresSession
			row.Counts = countsOf(e.entity.Counts())
		}
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// propertiesJSON are an entity's properties; durations in milliseconds, with zero
// meaning none where the model says so (DefaultTTL of sbkit.MaxTTL is reported as it
// is: the maximum).
type propertiesJSON struct {
	LockDuration                  int64  `json:"lockDurationMs,omitempty"`
	MaxDeliveryCount              int    `json:"maxDeliveryCount,omitempty"`
	DefaultTTL                    int64  `json:"defaultTimeToLiveMs"`
	DeadLetterOnExpiration        bool   `json:"deadLetteringOnMessageExpiration"`
	DuplicateDetectionWindow      int64  `json:"duplicateDetectionWindowMs"`
	RequiresSession               bool   `json:"requiresSession"`
	ForwardTo                     string `json:"forwardTo,omitempty"`
	ForwardDeadLetteredMessagesTo string `json:"forwardDeadLetteredMessagesTo,omitempty"`
}

func propertiesOf(o admin.Options, entity bool) propertiesJSON {
	p := propertiesJSON{
		DefaultTTL:               o.DefaultTTL.Milliseconds(),
		DuplicateDetectionWindow: o.DuplicateDetectionWindow.Milliseconds(),
	}
	if entity {
		p.LockDuration = o.LockDuration.Milliseconds()
		p.MaxDeliveryCount = o.MaxDeliveryCount
		p.DeadLetterOnExpiration = o.DeadLetterOnExpiration
		p.RequiresSession = o.RequiresSession
		p.ForwardTo = o.ForwardTo
		p.ForwardDeadLetteredMessagesTo = o.ForwardDeadLetteredMessagesTo
	}
	return p
}

// ruleJSON is a subscription's rule: its filter ("sql", "correlation", "true",
// "false" or the unknown type's name) and its action, if any.
type ruleJSON struct {
	Name        string                      `json:"name"`
	FilterType  string                      `json:"filterType"`
	SQL         string                      `json:"sqlExpression,omitempty"`
	Parameters  map[string]any              `json:"parameters,omitempty"`
	Correlation *sdkadmin.CorrelationFilter `json:"correlation,omitempty"`
	Action      string                      `json:"action,omitempty"`
	ActionType  string                      `json:"actionType,omitempty"`
}

func ruleOf(r sdkadmin.RuleProperties) ruleJSON {
	out := ruleJSON{Name: r.Name}
	switch f := r.Filter.(type) {
	case *sdkadmin.SQLFilter:
		out.FilterType, out.SQL, out.Parameters = "sql", f.Expression, f.Parameters
	case *sdkadmin.CorrelationFilter:
		out.FilterType, out.Correlation = "correlation", f
	case *sdkadmin.TrueFilter:
		out.FilterType = "true"
	case *sdkadmin.FalseFilter:
		out.FilterType = "false"
	case *sdkadmin.UnknownRuleFilter:
		out.FilterType = f.Type
	case nil:
		out.FilterType = "true"
	}
	switch a := r.Action.(type) {
	case *sdkadmin.SQLAction:
		out.ActionType, out.Action = "sql", a.Expression
	case *sdkadmin.UnknownRuleAction:
		out.ActionType = a.Type
	}
	return out
}

// entityJSON is the entity view.
type entityJSON struct {
	rowJSON
	AccessedAt    *time.Time     `json:"accessedAt,omitempty"`
	Properties    propertiesJSON `json:"properties"`
	Rules         []ruleJSON     `json:"rules,omitempty"`
	Subscriptions []string       `json:"subscriptionNames,omitempty"`
	SessionIDs    []string       `json:"sessionIds,omitempty"`
}

// lookup finds the queue, topic or subscription at path.
func (h *Handler) lookup(path string) (entityRef, error) {
	if path == "" {
		return entityRef{}, badRequest("path is required: a queue, a topic or topic/Subscriptions/name")
	}
	if topic, sub, ok := strings.Cut(path, "/Subscriptions/"); ok {
		if t, ok := h.model.Topic(topic); ok {
			if s, ok := t.Subscription(sub); ok {
				return entityRef{kind: "subscription", path: s.Name(), topic: t.Name(), name: sub, entity: s}, nil
			}
		}
	} else if q, ok := h.model.Queue(path); ok {
		return entityRef{kind: "queue", path: q.Name(), name: q.Name(), entity: q}, nil
	} else if t, ok := h.model.Topic(path); ok {
		return entityRef{kind: "topic", path: t.Name(), name: t.Name(), t: t}, nil
	}
	return entityRef{}, &apiError{status: http.StatusNotFound, msg: "no queue, topic or subscription " + strconv.Quote(path)}
}

// entity serves GET entity?path=.
func (h *Handler) entity(r *http.Request) (any, error) {
	e, err := h.lookup(r.URL.Query().Get("path"))
	if err != nil {
		return nil, err
	}
	out := entityJSON{rowJSON: rowJSON{Kind: e.kind, Path: e.path, Topic: e.topic, Name: e.name}}
	var accessed time.Time
	if e.t != nil {
		out.Status = e.t.Status()
		out.Properties = propertiesOf(e.t.Options(), false)
		accessed = e.t.AccessedAt()
		subs := e.t.Subscriptions()
		out.Subscriptions = make([]string, len(subs))
		for i, s := range subs {
			_, out.Subscriptions[i], _ = strings.Cut(s.Name(), "/Subscriptions/")
		}
		out.rowJSON.Subscriptions = ptr(len(subs))
	} else {
		o := e.entity.Options()
		out.Status = e.entity.Status()
		out.Sessions = o.RequiresSession
		out.Properties = propertiesOf(o, true)
		out.Counts = countsOf(e.entity.Counts())
		accessed = e.entity.AccessedAt()
		if e.kind == "subscription" {
			for _, rule := range e.entity.Rules() {
				out.Rules = append(out.Rules, ruleOf(rule))
			}
		}
		if o.RequiresSession {
			out.SessionIDs = h.model.Sessions(e.path)
		}
	}
	if !accessed.IsZero() {
		out.AccessedAt = &accessed
	}
	return out, nil
}

// messagesJSON is a page of messages; Next is the sequence number to peek from for the
// next page (absent at the end), Scanned how many messages were peeked for it.
type messagesJSON struct {
	Messages []messageJSON `json:"messages"`
	Next     *int64        `json:"next,omitempty"`
	Scanned  int           `json:"scanned"`
}

// subQueue reads the queue parameter: "main" (default) or "deadletter".
func subQueue(s string) (dlq bool, err error) {
	switch s {
	case "", "main":
		return false, nil
	case "deadletter":
		return true, nil
	}
	return false, badRequest(`queue must be "main" or "deadletter"`)
}

// stateOf maps the state parameter to a filter: "" or "all" keeps every message, else
// one of the SDK's message states.
func stateOf(s string) (func(*azservicebus.ReceivedMessage) bool, error) {
	var want azservicebus.MessageState
	switch s {
	case "", "all":
		return nil, nil
	case "active":
		want = azservicebus.MessageStateActive
	case "deferred":
		want = azservicebus.MessageStateDeferred
	case "scheduled":
		want = azservicebus.MessageStateScheduled
	default:
		return nil, badRequest(`state must be "all", "active", "deferred" or "scheduled"`)
	}
	return func(m *azservicebus.ReceivedMessage) bool { return m.State == want }, nil
}

// messages serves GET messages?path=&queue=main|deadletter&state=&from=&top=&body=:
// a page of peeked messages from sequence number from on. A state filter peeks in
// chunks until the page is full, the queue ends or maxScan messages were peeked.
func (h *Handler) messages(r *http.Request) (any, error) {
	q := r.URL.Query()
	e, err := h.lookup(q.Get("path"))
	if err != nil {
		return nil, err
	}
	if e.entity == nil {
		return nil, badRequest("a topic holds no messages: browse one of its subscriptions")
	}
	dlq, err := subQueue(q.Get("queue"))
	if err != nil {
		return nil, err
	}
	keep, err := stateOf(q.Get("state"))
	if err != nil {
		return nil, err
	}
	from, err := intParam(r, "from", 0, 0, 1<<62)
	if err != nil {
		return nil, err
	}
	top, err := intParam(r, "top", defaultMessages, 1, maxMessages)
	if err != nil {
		return nil, err
	}
	limit := previewBytes
	switch q.Get("body") {
	case "", "preview":
	case "full":
		limit = -1
	default:
		return nil, badRequest(`body must be "preview" or "full"`)
	}
	out := messagesJSON{Messages: []messageJSON{}}
	for {
		chunk := int(top)
		if keep != nil {
			chunk = max(chunk, peekChunk)
		}
		ms, err := h.model.Browse(r.Context(), e.path, dlq, from, chunk)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			out.Scanned++
			from = *m.SequenceNumber + 1
			if keep == nil || keep(m) {
				out.Messages = append(out.Messages, messageOf(m, limit))
				if len(out.Messages) == int(top) {
					break
				}
			}
		}
		if len(ms) < chunk && len(out.Messages) < int(top) {
			return out, nil // the end of the queue
		}
		if len(out.Messages) == int(top) || out.Scanned >= maxScan {
			out.Next = &from
			return out, nil
		}
	}
}

func ptr[T any](v T) *T { return &v }
