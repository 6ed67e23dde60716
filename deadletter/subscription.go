package deadletter

import (
	"fmt"
	"maps"
	"sort"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// RedriveRuleName is the name of the rule [RedriveRule] makes.
const RedriveRuleName = "sbkit-redrive"

// Re-driving a subscription's dead letters. Nothing can be sent to a subscription: a
// message reaches it only through its topic, and the topic gives a copy to every
// subscription whose rules match ("Topic filters and actions",
// learn.microsoft.com/azure/service-bus-messaging/topic-filters). A re-drive of one
// subscription's dead letters to the topic therefore reaches that subscription only
// when the topic's rules say so. The honest way sbkit offers:
//
//  1. the re-drive writes the subscription's name into each copy
//     ([RedriveOptions.Subscription], property [RedriveSubscriptionProperty]);
//  2. every subscription of the topic refuses copies meant for another: each of its
//     rules' filters is ANDed with [SubscriptionFilter] of its own name ([GuardRules]
//     rewrites a subscription's rules so);
//  3. the target subscription accepts its copies whatever its other rules say
//     ([RedriveRule]), since a message may have been routed there by a rule that has
//     changed since.
//
// Steps 2 and 3 change the topic's rules, which only the user may decide: sbctl's
// `dlq redrive --subscription` prints them and applies them with --apply-rules. Until
// every subscription has step 2, a copy also reaches the subscriptions without it whose
// rules match. A copy that matches a rule with an action gets that action applied again,
// as the original did. Messages sent without the property (all ordinary traffic) are
// routed as before: the guard is true for them.

// SubscriptionFilter is the SQL filter that accepts ordinary messages and the re-driven
// copies meant for sub, and refuses the copies meant for any other subscription.
func SubscriptionFilter(sub string) string {
	return fmt.Sprintf("%s IS NULL OR %s = %s", RedriveSubscriptionProperty, RedriveSubscriptionProperty, sqlString(sub))
}

// RedriveRule is the rule that delivers to sub the copies re-driven to it: a SQL filter
// on [RedriveSubscriptionProperty], named [RedriveRuleName], without an action (so a
// message it matches is delivered once even when other rules match too).
func RedriveRule(sub string) admin.RuleProperties {
	return admin.RuleProperties{
		Name:   RedriveRuleName,
		Filter: &admin.SQLFilter{Expression: fmt.Sprintf("%s = %s", RedriveSubscriptionProperty, sqlString(sub))},
	}
}

// GuardRules returns sub's rules with each filter ANDed with [SubscriptionFilter](sub),
// and whether any changed. A rule named [RedriveRuleName], a false filter, and a filter
// already guarded are kept as they are. A true filter becomes the guard itself; a
// correlation filter becomes the equivalent SQL filter (its properties compared as
// parameters); a SQL filter keeps its parameters. An unknown filter kind is an error,
// and nothing is changed.
func GuardRules(sub string, rules []admin.RuleProperties) ([]admin.RuleProperties, bool, error) {
	guard := SubscriptionFilter(sub)
	out := make([]admin.RuleProperties, len(rules))
	changed := false
	for i, r := range rules {
		out[i] = r
		if r.Name == RedriveRuleName {
			continue
		}
		var f *admin.SQLFilter
		switch rf := r.Filter.(type) {
		case nil, *admin.TrueFilter:
			f = &admin.SQLFilter{Expression: guard}
		case *admin.FalseFilter:
			continue
		case *admin.SQLFilter:
			if strings.Contains(rf.Expression, RedriveSubscriptionProperty) {
				continue
			}
			f = &admin.SQLFilter{Expression: fmt.Sprintf("(%s) AND (%s)", rf.Expression, guard), Parameters: maps.Clone(rf.Parameters)}
		case *admin.CorrelationFilter:
			expr, params := correlationSQL(rf)
			f = &admin.SQLFilter{Expression: fmt.Sprintf("(%s) AND (%s)", expr, guard), Parameters: params}
		default:
			return nil, false, fmt.Errorf("deadletter: rule %q of subscription %q has a filter of kind %T, which cannot be combined with the re-drive guard", r.Name, sub, r.Filter)
		}
		out[i].Filter = f
		changed = true
	}
	return out, changed, nil
}

// correlationSQL is the SQL filter equivalent to a correlation filter: every field set
// is compared for equality ("Topic filters and actions": a correlation filter matches
// when all its conditions do). Values are passed as parameters, so no quoting is
// needed; an empty filter is TRUE.
func correlationSQL(c *admin.CorrelationFilter) (string, map[string]any) {
	var conds []string
	params := map[string]any{}
	add := func(lhs string, v any) {
		p := fmt.Sprintf("@sbkit%d", len(params))
		params[p] = v
		conds = append(conds, lhs+" = "+p)
	}
	for _, sys := range []struct {
		name string
		v    *string
	}{
		{"sys.ContentType", c.ContentType}, {"sys.CorrelationId", c.CorrelationID}, {"sys.MessageId", c.MessageID},
		{"sys.ReplyTo", c.ReplyTo}, {"sys.ReplyToSessionId", c.ReplyToSessionID}, {"sys.SessionId", c.SessionID},
		{"sys.Label", c.Subject}, {"sys.To", c.To},
	} {
		if sys.v != nil {
			add(sys.name, *sys.v)
		}
	}
	names := make([]string, 0, len(c.ApplicationProperties))
	for k := range c.ApplicationProperties {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		add("["+strings.ReplaceAll(k, "]", "]]")+"]", c.ApplicationProperties[k])
	}
	if len(conds) == 0 {
		return "1=1", nil
	}
	return strings.Join(conds, " AND "), params
}

// sqlString quotes s as a SQL string constant.
func sqlString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
