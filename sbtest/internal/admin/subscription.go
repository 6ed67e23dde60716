package admin

import (
	"net/http"
	"time"

	sdkadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
)

// topicOr404 returns the topic called name, or the service's 404 error.
func (a *Handler) topicOr404(name string) (Topic, error) {
	t, ok := a.model.Topic(name)
	if !ok {
		return nil, notFound(name)
	}
	return t, nil
}

// subOr404 returns the subscription sub of topic, or the service's 404 error.
func (a *Handler) subOr404(topic, sub string) (Entity, error) {
	t, err := a.topicOr404(topic)
	if err != nil {
		return nil, err
	}
	e, ok := t.Subscription(sub)
	if !ok {
		return nil, notFound(subscriptionPath(topic, sub))
	}
	return e, nil
}

// subscription serves /{topic}/Subscriptions/{sub}.
func (a *Handler) subscription(r *http.Request, topic, sub string) (any, int, error) {
	path := subscriptionPath(topic, sub)
	switch r.Method {
	case http.MethodGet:
		e, err := a.subOr404(topic, sub)
		if err != nil {
			return nil, 0, err
		}
		return a.entry(r, path, sub, atom.Content{Subscription: a.describeSubscription(e)}), http.StatusOK, nil
	case http.MethodDelete:
		t, err := a.topicOr404(topic)
		if err != nil {
			return nil, 0, err
		}
		defer a.prune()
		return nil, http.StatusOK, t.DeleteSubscription(sub)
	case http.MethodPut:
		e, err := readEntry(r)
		if err != nil {
			return nil, 0, err
		}
		if e.Content.Subscription == nil {
			return nil, 0, bad("The request body has no SubscriptionDescription.")
		}
		return a.putSubscription(r, topic, sub, e.Content.Subscription)
	}
	return nil, 0, methodNotAllowed(r)
}

// putSubscription creates or updates (If-Match) the subscription sub of topic as d
// describes, with d's DefaultRuleDescription as its only rule when it is created.
func (a *Handler) putSubscription(r *http.Request, topic, sub string, d *atom.SubscriptionDescription) (any, int, error) {
	if err := checkName("subscription", sub, subscriptionNameRE, subscriptionNameMaxLen); err != nil && !isUpdate(r) {
		return nil, 0, err
	}
	var o Options
	if err := commonOptions(&o, d.LockDuration, d.DefaultMessageTimeToLive, d.MaxDeliveryCount, d.DeadLetteringOnMessageExpiration, d.RequiresSession); err != nil {
		return nil, 0, err
	}
	if err := checkReported(d.Status, d.AutoDeleteOnIdle, nil, nil); err != nil {
		return nil, 0, err
	}
	if err := checkKept(d.UserMetadata, nil); err != nil {
		return nil, 0, err
	}
	path := subscriptionPath(topic, sub)
	if err := a.forwardOptions(&o, d.ForwardTo, d.ForwardDeadLetteredMessagesTo, path); err != nil {
		return nil, 0, err
	}
	if d.DefaultRuleDescription != nil {
		rp, err := ruleFromAtom(d.DefaultRuleDescription)
		if err != nil {
			return nil, 0, err
		}
		o.DefaultRule = &rp // the subscription's only rule from its creation ("Topic filters and actions")
	}
	t, err := a.topicOr404(topic)
	if err != nil {
		return nil, 0, err
	}
	e, status, err := createOrUpdate(r, "Subscription", path, &o, d.Status,
		func() (Entity, bool) { return t.Subscription(sub) },
		func() (Entity, error) {
			a.creating.Lock()
			defer a.creating.Unlock()
			if n := len(t.Subscriptions()); n >= MaxSubscriptions {
				return nil, quotaExceeded("The topic '%s' already has %d subscriptions, the most a topic can have.", topic, n)
			}
			return t.NewSubscription(sub, &o)
		})
	if err != nil {
		return nil, 0, err
	}
	stored := *d
	stored.DefaultRuleDescription = nil
	a.remember(e.Name(), e, &stored)
	return a.entry(r, path, sub, atom.Content{Subscription: a.describeSubscription(e)}), status, nil
}

// describeSubscription reports a subscription as describeQueue reports a queue.
func (a *Handler) describeSubscription(e Entity) *atom.SubscriptionDescription {
	d, m := lastPut[atom.SubscriptionDescription](a, e.Name(), e)
	reportCommon(e.Options(), &d.LockDuration, &d.DefaultMessageTimeToLive, &d.MaxDeliveryCount, &d.DeadLetteringOnMessageExpiration, &d.RequiresSession)
	def(&d.DeadLetteringOnFilterEvaluationExceptions, true)
	def(&d.EnableBatchedOperations, true)
	d.Status = ptr(e.Status())
	d.EntityAvailabilityStatus = ptr("Available") // the JavaScript admin client requires it (subscriptionResourceSerializer.js)
	reportAutoDelete(&d.AutoDeleteOnIdle, e.Options())
	c := e.Counts()
	d.MessageCount, d.CountDetails = messageCount(c), countDetails(c)
	d.CreatedAt, d.UpdatedAt, d.AccessedAt = stamp(m.created), stamp(m.updated), accessedStamp(e.AccessedAt())
	return &d
}

// listSubscriptions serves /{topic}/Subscriptions: one page of the topic's subscriptions.
func (a *Handler) listSubscriptions(r *http.Request, topic string, skip, top int) (any, int, error) {
	t, err := a.topicOr404(topic)
	if err != nil {
		return nil, 0, err
	}
	var entries []atom.Entry
	for _, e := range page(t.Subscriptions(), skip, top) {
		name := e.Name()[len(topic)+len("/Subscriptions/"):]
		entries = append(entries, *a.entry(r, e.Name(), name, atom.Content{Subscription: a.describeSubscription(e)}))
	}
	return a.feed(r, "Subscriptions", entries), http.StatusOK, nil
}

// rule serves /{topic}/Subscriptions/{sub}/Rules/{rule}.
func (a *Handler) rule(r *http.Request, topic, sub, name string) (any, int, error) {
	e, err := a.subOr404(topic, sub)
	if err != nil {
		return nil, 0, err
	}
	path := e.Name() + "/Rules/" + name
	switch r.Method {
	case http.MethodGet:
		rp, ok := e.Rule(name)
		if !ok {
			return nil, 0, notFound(path)
		}
		ent, err := a.ruleEntry(r, path, rp)
		return ent, http.StatusOK, err
	case http.MethodDelete:
		return nil, http.StatusOK, e.DeleteRule(name)
	case http.MethodPut:
		ent, err := readEntry(r)
		if err != nil {
			return nil, 0, err
		}
		if ent.Content.Rule == nil {
			return nil, 0, bad("The request body has no RuleDescription.")
		}
		rp, err := ruleFromAtom(&ent.Content.Rule.RuleBody)
		if err != nil {
			return nil, 0, err
		}
		rp.Name = name
		status := http.StatusCreated
		if isUpdate(r) {
			err, status = e.UpdateRule(rp), http.StatusOK
		} else {
			err = e.CreateRule(rp)
		}
		if err != nil {
			return nil, 0, err
		}
		rp, _ = e.Rule(name)
		doc, err := a.ruleEntry(r, path, rp)
		return doc, status, err
	}
	return nil, 0, methodNotAllowed(r)
}

// ruleEntry wraps the rule rp at path as the service does.
func (a *Handler) ruleEntry(r *http.Request, path string, rp sdkadmin.RuleProperties) (*atom.Entry, error) {
	body, err := ruleToAtom(rp)
	if err != nil {
		return nil, err
	}
	return a.entry(r, path, rp.Name, atom.Content{Rule: &atom.RuleDescription{RuleBody: body}}), nil
}

// listRules serves /{topic}/Subscriptions/{sub}/Rules: one page of the rules.
func (a *Handler) listRules(r *http.Request, topic, sub string, skip, top int) (any, int, error) {
	e, err := a.subOr404(topic, sub)
	if err != nil {
		return nil, 0, err
	}
	var entries []atom.Entry
	for _, rp := range page(e.Rules(), skip, top) {
		ent, err := a.ruleEntry(r, e.Name()+"/Rules/"+rp.Name, rp)
		if err != nil {
			return nil, 0, err
		}
		entries = append(entries, *ent)
	}
	return a.feed(r, "Rules", entries), http.StatusOK, nil
}

// ruleFromAtom converts a rule as the SDK sends it (its convertRuleFilterToFilterDescription
// and convertRuleActionToActionDescription) into the model's form.
func ruleFromAtom(b *atom.RuleBody) (sdkadmin.RuleProperties, error) {
	rp := sdkadmin.RuleProperties{Name: b.Name} // a default rule without a name is $Default: the model's default
	f := b.Filter
	switch {
	case f == nil || f.Type == "TrueFilter":
		rp.Filter = &sdkadmin.TrueFilter{}
	case f.Type == "FalseFilter":
		rp.Filter = &sdkadmin.FalseFilter{}
	case f.Type == "SqlFilter":
		if f.SQLExpression == nil {
			return rp, bad("A SqlFilter needs a SqlExpression.")
		}
		params, err := atom.DecodeValues(f.Parameters)
		if err != nil {
			return rp, bad("%v", err)
		}
		rp.Filter = &sdkadmin.SQLFilter{Expression: *f.SQLExpression, Parameters: params}
	case f.Type == "CorrelationFilter":
		props, err := atom.DecodeValues(f.Properties)
		if err != nil {
			return rp, bad("%v", err)
		}
		rp.Filter = &sdkadmin.CorrelationFilter{ContentType: f.ContentType, CorrelationID: f.CorrelationID, MessageID: f.MessageID,
			ReplyTo: f.ReplyTo, ReplyToSessionID: f.ReplyToSessionID, SessionID: f.SessionID, Subject: f.Label, To: f.To,
			ApplicationProperties: props}
	default:
		return rp, bad("The filter type '%s' is not supported.", f.Type)
	}
	switch act := b.Action; {
	case act == nil || act.Type == "EmptyRuleAction" || act.Type == "":
	case act.Type == "SqlRuleAction":
		params, err := atom.DecodeValues(act.Parameters)
		if err != nil {
			return rp, bad("%v", err)
		}
		expr := ""
		if act.SQLExpression != nil {
			expr = *act.SQLExpression
		}
		rp.Action = &sdkadmin.SQLAction{Expression: expr, Parameters: params}
	default:
		return rp, bad("The action type '%s' is not supported.", act.Type)
	}
	return rp, nil
}

// ruleToAtom is the inverse of ruleFromAtom, in the shape the SDK parses back (its
// newRulePropertiesFromEnvelope needs an Action element, EmptyRuleAction for none).
func ruleToAtom(rp sdkadmin.RuleProperties) (atom.RuleBody, error) {
	b := atom.RuleBody{Name: rp.Name, CreatedAt: stamp(time.Now()), Action: &atom.Action{Type: "EmptyRuleAction"}}
	switch f := rp.Filter.(type) {
	case *sdkadmin.TrueFilter:
		b.Filter = &atom.Filter{Type: "TrueFilter", SQLExpression: ptr("1=1")}
	case *sdkadmin.FalseFilter:
		b.Filter = &atom.Filter{Type: "FalseFilter", SQLExpression: ptr("1=0")}
	case *sdkadmin.SQLFilter:
		params, err := atom.EncodeValues(f.Parameters)
		if err != nil {
			return b, err
		}
		b.Filter = &atom.Filter{Type: "SqlFilter", SQLExpression: ptr(f.Expression), Parameters: params}
	case *sdkadmin.CorrelationFilter:
		props, err := atom.EncodeValues(f.ApplicationProperties)
		if err != nil {
			return b, err
		}
		b.Filter = &atom.Filter{Type: "CorrelationFilter", ContentType: f.ContentType, CorrelationID: f.CorrelationID,
			MessageID: f.MessageID, ReplyTo: f.ReplyTo, ReplyToSessionID: f.ReplyToSessionID, SessionID: f.SessionID,
			Label: f.Subject, To: f.To, Properties: props}
	}
	if act, ok := rp.Action.(*sdkadmin.SQLAction); ok {
		params, err := atom.EncodeValues(act.Parameters)
		if err != nil {
			return b, err
		}
		b.Action = &atom.Action{Type: "SqlRuleAction", SQLExpression: ptr(act.Expression), Parameters: params}
	}
	return b, nil
}
