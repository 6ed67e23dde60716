package sbtest

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/sqlfilter"
)

// DefaultRuleName is the name of the rule a new subscription gets: a true filter and no
// action ("Topic filters and actions": each newly created subscription has an initial
// default rule with the true filter).
const DefaultRuleName = "$Default"

// MaxRulesPerSubscription is the service's quota on the rules of one subscription
// (Service Bus quotas: 2,000 filters and actions per subscription).
const MaxRulesPerSubscription = 2000

// ruleNameMaxLen is the longest rule name the service accepts (Service Bus quotas and
// naming rules: 50 characters).
const ruleNameMaxLen = 50

// RuleNameProperty is the application property a rule with an action stamps on the
// copy it produces, with the rule's name as value ("Topic filters and actions").
const RuleNameProperty = "RuleName"

// RuleEvaluationFailedReason is the dead-letter reason of a message whose evaluation
// against a subscription's rules failed: it needed more than 1,048,576 steps (a byte of a
// string built, compared or matched with LIKE), or an action gave it more than 64 KiB of
// properties. The subscription keeps the message, unchanged, in its dead-letter queue,
// and the description names the rule ("Service Bus dead-letter queues": errors while a
// subscription's rule runs are captured in the dead-letter queue with the offending
// message; the reason text is sbtest's own).
const RuleEvaluationFailedReason = "RuleEvaluationFailed"

// maxActionProperties bounds the properties a rule's action may give a message, in
// bytes (names, string and binary values; 8 for other values): the service's limit on
// the properties of a message (Service Bus quotas, message property size: 64 KB), or the
// message's own when it came with more.
const maxActionProperties = 64 << 10

var (
	// ErrNotFound is returned for an operation on a rule (or entity) that does not exist.
	ErrNotFound = errors.New("sbtest: not found")
	// ErrNotSubscription is returned when managing rules of a queue.
	ErrNotSubscription = errors.New("sbtest: rules belong to topic subscriptions")
)

// rule is a compiled subscription rule.
type rule struct {
	props  admin.RuleProperties // as given, deep-copied
	match  func(p *payload, seq int64, b *sqlfilter.Budget) (bool, error)
	action *sqlfilter.Action // nil: no action
}

// ruleSet is the rules of one subscription, in creation order. It has its own lock
// because rules change rarely and are read on every send to the topic.
type ruleSet struct {
	mu    sync.RWMutex
	rules []*rule
}

// compileRule checks and compiles r. A nil filter is the true filter, as the service
// uses for a rule created without one.
func compileRule(r admin.RuleProperties) (*rule, error) {
	if r.Name == "" || len(r.Name) > ruleNameMaxLen {
		return nil, fmt.Errorf("%w: rule name %q must have 1 to %d characters", ErrInvalidOptions, r.Name, ruleNameMaxLen)
	}
	c := &rule{props: cloneRule(r)}
	switch f := r.Filter.(type) {
	case nil, *admin.TrueFilter:
		c.match = func(*payload, int64, *sqlfilter.Budget) (bool, error) { return true, nil }
	case *admin.FalseFilter:
		c.match = func(*payload, int64, *sqlfilter.Budget) (bool, error) { return false, nil }
	case *admin.SQLFilter:
		sf, err := sqlfilter.ParseFilter(f.Expression, f.Parameters)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrInvalidOptions, r.Name, err)
		}
		c.match = func(p *payload, seq int64, b *sqlfilter.Budget) (bool, error) {
			return sf.Match(&payloadView{p: p, seq: seq}, b)
		}
	case *admin.CorrelationFilter:
		if !hasCondition(f) {
			return nil, fmt.Errorf("%w: rule %q: a correlation filter needs at least one condition", ErrInvalidOptions, r.Name)
		}
		c.match = func(p *payload, _ int64, _ *sqlfilter.Budget) (bool, error) { return correlationMatch(f, p), nil }
	default:
		return nil, fmt.Errorf("%w: rule %q: unsupported filter %T", ErrInvalidOptions, r.Name, r.Filter)
	}
	switch a := r.Action.(type) {
	case nil:
	case *admin.SQLAction:
		sa, err := sqlfilter.ParseAction(a.Expression, a.Parameters)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrInvalidOptions, r.Name, err)
		}
		c.action = sa
	default:
		return nil, fmt.Errorf("%w: rule %q: unsupported action %T", ErrInvalidOptions, r.Name, r.Action)
	}
	return c, nil
}

// cloneRule deep-copies the parts of r a caller could mutate afterwards.
func cloneRule(r admin.RuleProperties) admin.RuleProperties {
	switch f := r.Filter.(type) {
	case *admin.SQLFilter:
		r.Filter = &admin.SQLFilter{Expression: f.Expression, Parameters: maps.Clone(f.Parameters)}
	case *admin.CorrelationFilter:
		c := *f
		c.ApplicationProperties = maps.Clone(f.ApplicationProperties)
		r.Filter = &c
	case nil:
		r.Filter = &admin.TrueFilter{}
	}
	if a, ok := r.Action.(*admin.SQLAction); ok {
		r.Action = &admin.SQLAction{Expression: a.Expression, Parameters: maps.Clone(a.Parameters)}
	}
	return r
}

func hasCondition(f *admin.CorrelationFilter) bool {
	return len(f.ApplicationProperties) > 0 || f.ContentType != nil || f.CorrelationID != nil ||
		f.MessageID != nil || f.ReplyTo != nil || f.ReplyToSessionID != nil || f.SessionID != nil ||
		f.Subject != nil || f.To != nil
}

// correlationMatch reports whether every condition of f holds: each set system property
// equals the message's, each application property exists with an equal value ("Topic
// filters and actions": a correlation filter matches when all its conditions match,
// case-sensitively for strings).
func correlationMatch(f *admin.CorrelationFilter, p *payload) bool {
	eq := func(want, got *string) bool { return want == nil || (got != nil && *got == *want) }
	id := &p.messageID
	if !eq(f.ContentType, p.contentType) || !eq(f.CorrelationID, p.correlationID) || !eq(f.MessageID, id) ||
		!eq(f.ReplyTo, p.replyTo) || !eq(f.ReplyToSessionID, p.replyToSessionID) ||
		!eq(f.SessionID, p.sessionID) || !eq(f.Subject, p.subject) || !eq(f.To, p.to) {
		return false
	}
	for k, want := range f.ApplicationProperties {
		got, ok := p.props[k]
		if !ok || !sameValue(want, got) {
			return false
		}
	}
	return true
}

// sameValue compares property values, numbers by value whatever their Go type (the
// admin API hands back int64 for an int sent).
func sameValue(a, b any) bool {
	na, aNum := number(a)
	nb, bNum := number(b)
	if aNum || bNum {
		return aNum && bNum && na == nb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return 0, false
}

// route returns the copies of p that the subscription keeps: none when no rule
// matches; one, unchanged, when any rule without an action matches; plus one per
// matching rule with an action, with the action applied and RuleNameProperty set
// ("Topic filters and actions": five matching rules, two with actions, give three
// messages). Its rules share one sqlfilter budget; an error (the budget ran out, or an
// action made properties too large) names the rule, and no copy is kept.
func (rs *ruleSet) route(p *payload, seq int64) ([]*payload, error) {
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	var out []*payload
	plain := false
	budget := sqlfilter.NewBudget()
	for _, r := range rs.rules {
		ok, err := r.match(p, seq, budget)
		if err != nil {
			return nil, fmt.Errorf("rule '%s': %w", r.props.Name, err)
		}
		if !ok {
			continue
		}
		if r.action == nil {
			plain = true
			continue
		}
		fp := p.filterProps(seq)
		before := propertyBytes(fp)
		if err := r.action.Apply(fp, budget); err != nil {
			return nil, fmt.Errorf("rule '%s': %w", r.props.Name, err)
		}
		fp.SetProperty(false, RuleNameProperty, r.props.Name)
		after := propertyBytes(fp)
		if after > max(maxActionProperties, before) {
			return nil, fmt.Errorf("rule '%s': the action gives the message %d bytes of properties, more than the %d the service allows", r.props.Name, after, maxActionProperties)
		}
		c := p.withFilterProps(fp)
		c.size = max(0, c.size+after-before) // what the copy costs in the entity's size
		out = append(out, c)
	}
	if plain {
		out = append([]*payload{p}, out...)
	}
	return out, nil
}

// ruleFailed dead-letters p, which the subscription e's rules failed to evaluate (err
// says why), with RuleEvaluationFailedReason. Called with e.mu held.
func (e *Entity) ruleFailed(p *payload, seq int64, now time.Time, err error) {
	p.countForwarded()
	e.stats.sent.Add(1)
	e.toDLQ(e.newMessage(p, seq, now, time.Time{}), ptr(RuleEvaluationFailedReason), ptr(fmt.Sprintf("Subscription '%s', %v.", e.path, err)), nil)
}

// propertyBytes is the size of the properties in fp, as maxActionProperties counts them.
func propertyBytes(fp *sqlfilter.Properties) int {
	n := 0
	for k, v := range fp.User {
		n += len(k)
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		default:
			n += 8
		}
	}
	for _, v := range fp.Sys {
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return n
}

// payloadView lets a SQL filter read a payload without copying it.
type payloadView struct {
	p    *payload
	seq  int64
	fold sqlfilter.Fold // user property names in any letter case
}

// stringSysProps are the string system properties a SQL filter reads and an action may
// set, by their names in the SQL language, each with the payload field that holds it
// (MessageId, a plain string, is handled on its own).
var stringSysProps = map[string]func(p *payload) **string{
	"ContentType":      func(p *payload) **string { return &p.contentType },
	"CorrelationId":    func(p *payload) **string { return &p.correlationID },
	"PartitionKey":     func(p *payload) **string { return &p.partitionKey },
	"ReplyTo":          func(p *payload) **string { return &p.replyTo },
	"ReplyToSessionId": func(p *payload) **string { return &p.replyToSessionID },
	"SessionId":        func(p *payload) **string { return &p.sessionID },
	"Label":            func(p *payload) **string { return &p.subject },
	"To":               func(p *payload) **string { return &p.to },
}

// Property implements sqlfilter.Message with the properties filterProps lists.
func (v *payloadView) Property(sys bool, name string) (any, bool) {
	p := v.p
	if !sys {
		key, ok := v.fold.Key(p.props, name)
		return p.props[key], ok
	}
	switch name {
	case "SequenceNumber":
		return v.seq, true
	case "Size":
		return int64(p.size), true
	case "TimeToLive":
		if p.ttl == nil {
			return nil, false
		}
		return *p.ttl, true
	case "MessageId":
		if p.messageID == "" {
			return nil, false
		}
		return p.messageID, true
	}
	if field, ok := stringSysProps[name]; ok {
		if s := *field(p); s != nil {
			return *s, true
		}
	}
	return nil, false
}

// filterProps exposes p's properties to the SQL language, as a copy an action may
// change: the system properties the sender can set, the sequence number and size, and
// the application properties.
func (p *payload) filterProps(seq int64) *sqlfilter.Properties {
	sys := map[string]any{"SequenceNumber": seq, "Size": int64(p.size)}
	if p.messageID != "" {
		sys["MessageId"] = p.messageID
	}
	for name, field := range stringSysProps {
		if s := *field(p); s != nil {
			sys[name] = *s
		}
	}
	if p.ttl != nil {
		sys["TimeToLive"] = *p.ttl
	}
	return &sqlfilter.Properties{Sys: sys, User: cloneProps(p.props)}
}

// withFilterProps returns a copy of p with the properties an action left in fp.
func (p *payload) withFilterProps(fp *sqlfilter.Properties) *payload {
	q := *p
	q.props = fp.User
	str := func(name string) *string {
		if s, ok := fp.Sys[name].(string); ok {
			return &s
		}
		return nil
	}
	q.messageID = ""
	if id := str("MessageId"); id != nil {
		q.messageID = *id
	}
	for name, field := range stringSysProps {
		*field(&q) = str(name)
	}
	return &q
}

func (e *Entity) ruleSet() (*ruleSet, error) {
	if e.topic == nil {
		return nil, fmt.Errorf("%w: %q is a queue", ErrNotSubscription, e.path)
	}
	return &e.rules, nil
}

// CreateRule adds a rule to a subscription. A nil Filter means the true filter. It
// returns ErrInvalidOptions for a bad name, filter or action (a SQL syntax error says
// where), ErrExists when the name is taken, ErrNotSubscription on a queue.
func (e *Entity) CreateRule(r admin.RuleProperties) error {
	return e.editRule(r.Name, &r, false, func(rs *ruleSet, i int, c *rule) error {
		if i >= 0 {
			return fmt.Errorf("%w: rule %q of %q", ErrExists, r.Name, e.path)
		}
		if len(rs.rules) >= MaxRulesPerSubscription {
			return fmt.Errorf("%w: %q already has %d rules", ErrInvalidOptions, e.path, MaxRulesPerSubscription)
		}
		rs.rules = append(rs.rules, c)
		return nil
	})
}

// UpdateRule replaces the filter and action of the rule named r.Name. Errors as for
// CreateRule, and ErrNotFound when there is no such rule.
func (e *Entity) UpdateRule(r admin.RuleProperties) error {
	return e.editRule(r.Name, &r, true, func(rs *ruleSet, i int, c *rule) error {
		rs.rules[i] = c
		return nil
	})
}

// DeleteRule removes a rule; a subscription left without rules gets no messages. It
// returns ErrNotFound when there is no such rule.
func (e *Entity) DeleteRule(name string) error {
	return e.editRule(name, nil, true, func(rs *ruleSet, i int, _ *rule) error {
		rs.rules = slices.Delete(rs.rules, i, i+1)
		return nil
	})
}

// SetRules replaces every rule of a subscription with rules, in one step: a message
// sent meanwhile is routed by the old rules or by the new ones, never by a mix. A nil
// Filter means the true filter; no rule at all means the subscription gets no messages.
// It returns ErrInvalidOptions for a bad name, filter or action, a name given twice or
// more than MaxRulesPerSubscription rules, and ErrNotSubscription on a queue; then no
// rule changes.
func (e *Entity) SetRules(rules []admin.RuleProperties) error {
	rs, err := e.ruleSet()
	if err != nil {
		return err
	}
	if len(rules) > MaxRulesPerSubscription {
		return fmt.Errorf("%w: %d rules for %q, at most %d", ErrInvalidOptions, len(rules), e.path, MaxRulesPerSubscription)
	}
	compiled := make([]*rule, len(rules))
	names := make(map[string]bool, len(rules))
	for i, r := range rules {
		if names[r.Name] {
			return fmt.Errorf("%w: rule %q given twice for %q", ErrInvalidOptions, r.Name, e.path)
		}
		names[r.Name] = true
		if compiled[i], err = compileRule(r); err != nil {
			return err
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.rules = compiled
	return nil
}

// editRule compiles r (when not nil) and runs f under the rule lock with the index of
// the rule called name (-1 if none); when mustExist, a missing rule is ErrNotFound.
func (e *Entity) editRule(name string, r *admin.RuleProperties, mustExist bool, f func(rs *ruleSet, i int, c *rule) error) error {
	rs, err := e.ruleSet()
	if err != nil {
		return err
	}
	var c *rule
	if r != nil {
		if c, err = compileRule(*r); err != nil {
			return err
		}
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	i := rs.index(name)
	if i < 0 && mustExist {
		return fmt.Errorf("%w: rule %q of %q", ErrNotFound, name, e.path)
	}
	return f(rs, i, c)
}

// Rule returns a copy of the named rule.
func (e *Entity) Rule(name string) (admin.RuleProperties, bool) {
	rs, err := e.ruleSet()
	if err != nil {
		return admin.RuleProperties{}, false
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	if i := rs.index(name); i >= 0 {
		return cloneRule(rs.rules[i].props), true
	}
	return admin.RuleProperties{}, false
}

// Rules returns copies of a subscription's rules in creation order; nil for a queue.
func (e *Entity) Rules() []admin.RuleProperties {
	rs, err := e.ruleSet()
	if err != nil {
		return nil
	}
	rs.mu.RLock()
	defer rs.mu.RUnlock()
	out := make([]admin.RuleProperties, len(rs.rules))
	for i, r := range rs.rules {
		out[i] = cloneRule(r.props)
	}
	return out
}

func (rs *ruleSet) index(name string) int {
	return slices.IndexFunc(rs.rules, func(r *rule) bool { return r.props.Name == name })
}

// defaultRule is the rule every new subscription starts with.
func defaultRule() *rule {
	r, _ := compileRule(admin.RuleProperties{Name: DefaultRuleName, Filter: &admin.TrueFilter{}})
	return r
}

// noteCopy remembers that seq is a copy of the scheduled message orig made by an action
// rule, so that cancelling orig cancels it too. Called with t.mu held.
func (t *Topic) noteCopy(orig, seq int64, scheduled bool) {
	if !scheduled {
		return
	}
	if t.copies == nil {
		t.copies = make(map[int64][]int64)
	}
	t.copies[orig] = append(t.copies[orig], seq)
}

// withCopies returns seqs and the copies of those messages, forgetting the copies.
// Called with t.mu held.
func (t *Topic) withCopies(seqs []int64) []int64 {
	all := slices.Clone(seqs)
	for _, s := range seqs {
		all = append(all, t.copies[s]...)
		delete(t.copies, s)
	}
	return all
}
