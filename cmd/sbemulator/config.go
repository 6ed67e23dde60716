package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/sbkit/sbkit/internal/emulator/isoduration"
	"github.com/sbkit/sbkit/sbtest"
)

// errConfig is wrapped by every error about a configuration file's content.
var errConfig = errors.New("sbemulator: config")

// defaultDuplicateWindow is the duplicate detection window of an entity that requires
// duplicate detection without naming a window: PT20S, the default of Microsoft's emulator
// configuration schema (Config-schema.json, DuplicateDetectionHistoryTimeWindow).
const defaultDuplicateWindow = 20 * time.Second

// emulatorConfig is the configuration file of Microsoft's Service Bus emulator
// (UserConfig.Namespaces[].Queues/Topics, each with Properties; topics with
// Subscriptions, subscriptions with Rules). Logging and the namespace's name are read
// and ignored: this emulator has one namespace and logs to stderr.
type emulatorConfig struct {
	UserConfig struct {
		Namespaces []struct {
			Name   string
			Queues []struct {
				Name       string
				Properties entityProps
			}
			Topics []struct {
				Name          string
				Properties    entityProps
				Subscriptions []struct {
					Name       string
					Properties entityProps
					Rules      []configRule
				}
			}
		}
	}
	Sbkit sbkitConfig // this emulator's own settings (config_sas.go)
}

// entityProps are the Properties of a queue, topic or subscription in the configuration
// file. Durations are ISO 8601 strings ("PT1M").
type entityProps struct {
	DeadLetteringOnMessageExpiration    bool
	DefaultMessageTimeToLive            string
	DuplicateDetectionHistoryTimeWindow string
	LockDuration                        string
	MaxDeliveryCount                    int
	RequiresDuplicateDetection          bool
	RequiresSession                     bool
	ForwardTo                           string
	ForwardDeadLetteredMessagesTo       string
}

// entities are the queues and topics the emulator creates at startup.
type entities struct {
	Queues map[string]*sbtest.EntityOptions
	Topics map[string]sbtest.TopicOptions
	// Rules replace the $Default rule of the subscriptions they name
	// (topic/Subscriptions/name).
	Rules map[string][]admin.RuleProperties
	// SASKeys are the shared access keys the files name (Sbkit.SharedAccessKeys,
	// config_sas.go), name to key: not entities, but read from the same files.
	SASKeys map[string]string
}

func newEntities() *entities {
	return &entities{
		Queues:  map[string]*sbtest.EntityOptions{},
		Topics:  map[string]sbtest.TopicOptions{},
		Rules:   map[string][]admin.RuleProperties{},
		SASKeys: map[string]string{},
	}
}

// create makes the entities in ns: queues, topics, subscriptions, then the rules (a
// subscription with rules in the file has those instead of $Default).
func (e *entities) create(ns *sbtest.Namespace) error {
	for name, o := range e.Queues {
		if _, err := ns.NewQueue(name, o); err != nil {
			return fmt.Errorf("sbemulator: queue %q: %w", name, err)
		}
	}
	for name, t := range e.Topics {
		topic, err := ns.NewTopic(name, t.Options)
		if err != nil {
			return fmt.Errorf("sbemulator: topic %q: %w", name, err)
		}
		for sub, o := range t.Subscriptions {
			if _, err := topic.NewSubscription(sub, o); err != nil {
				return fmt.Errorf("sbemulator: subscription %q of %q: %w", sub, name, err)
			}
		}
	}
	if err := checkForwards(ns, e); err != nil {
		return err
	}
	for path, rules := range e.Rules {
		sub, ok := ns.Entity(path)
		if !ok {
			return fmt.Errorf("sbemulator: rules for %q, which does not exist", path)
		}
		// The file's rules replace $Default, at once (one of them may be called $Default).
		if err := sub.SetRules(rules); err != nil {
			return fmt.Errorf("sbemulator: %s: %w", path, err)
		}
	}
	return nil
}

// checkForwards fails when an entity forwards to a queue or topic that does not exist.
func checkForwards(ns *sbtest.Namespace, e *entities) error {
	exists := func(name string) bool {
		if _, ok := ns.Topic(name); ok {
			return true
		}
		for q := range e.Queues {
			if strings.EqualFold(q, name) { // names resolve in any letter case, as the model's
				return true
			}
		}
		return false
	}
	check := func(what string, o *sbtest.EntityOptions) error {
		if o == nil {
			return nil
		}
		for _, to := range []string{o.ForwardTo, o.ForwardDeadLetteredMessagesTo} {
			if to != "" && !exists(to) {
				return fmt.Errorf("%w: %s forwards to %q, which is neither a queue nor a topic", errConfig, what, to)
			}
		}
		return nil
	}
	for name, o := range e.Queues {
		if err := check("queue "+name, o); err != nil {
			return err
		}
	}
	for topic, t := range e.Topics {
		for sub, o := range t.Subscriptions {
			if err := check("subscription "+topic+"/"+sub, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// addQueue declares a queue; a name declared twice is an error.
func (e *entities) addQueue(name string, o *sbtest.EntityOptions) error {
	if _, ok := e.Queues[name]; ok {
		return fmt.Errorf("%w: queue %q declared twice", errConfig, name)
	}
	if _, ok := e.Topics[name]; ok {
		return fmt.Errorf("%w: %q is declared as a topic and as a queue", errConfig, name)
	}
	e.Queues[name] = o
	return nil
}

// addTopic declares a topic (or adds options to one only named by a subscription).
func (e *entities) addTopic(name string, o *sbtest.EntityOptions) error {
	if _, ok := e.Queues[name]; ok {
		return fmt.Errorf("%w: %q is declared as a queue and as a topic", errConfig, name)
	}
	t, ok := e.Topics[name]
	if ok && t.Options != nil {
		return fmt.Errorf("%w: topic %q declared twice", errConfig, name)
	}
	if t.Subscriptions == nil {
		t.Subscriptions = map[string]*sbtest.EntityOptions{}
	}
	t.Options = o
	e.Topics[name] = t
	return nil
}

// addSubscription declares a subscription, and its topic if it is not declared yet.
func (e *entities) addSubscription(topic, name string, o *sbtest.EntityOptions) error {
	if _, ok := e.Queues[topic]; ok {
		return fmt.Errorf("%w: subscription %q of %q, which is a queue", errConfig, name, topic)
	}
	t := e.Topics[topic]
	if t.Subscriptions == nil {
		t.Subscriptions = map[string]*sbtest.EntityOptions{}
	}
	if _, ok := t.Subscriptions[name]; ok {
		return fmt.Errorf("%w: subscription %q of topic %q declared twice", errConfig, name, topic)
	}
	t.Subscriptions[name] = o
	e.Topics[topic] = t
	return nil
}

// loadConfigFile reads a configuration file in the format of Microsoft's emulator and
// adds its entities to e.
func loadConfigFile(path string, e *entities) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sbemulator: %w", err)
	}
	if err := parseConfig(b, e); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// parseConfig adds the entities and shared access keys of a configuration file's
// content to e. The content is JSON with comments, as Microsoft ships its Config.json
// (config_json.go); every error about it names a line and column (a value it cannot
// honour, that of its entity). A key the schema of Microsoft's emulator does not have,
// other than sbkit's own Sbkit section (config_sas.go), is an error naming it
// (checkKeys); the ones this emulator does not use (the namespace's Name, Logging) are
// read and ignored.
func parseConfig(b []byte, e *entities) error {
	cj, err := readConfigJSON(b)
	if err != nil {
		return err
	}
	if err := checkKeys(cj.std); err != nil {
		var ke *keyError
		if errors.As(err, &ke) {
			ke.pos = cj.keyPosition(ke.pointer)
		}
		return err
	}
	var c emulatorConfig
	if err := cj.unmarshal(&c); err != nil {
		return err
	}
	if len(c.UserConfig.Namespaces) == 0 && len(c.Sbkit.SharedAccessKeys) == 0 {
		return fmt.Errorf("%w: no UserConfig.Namespaces (nor Sbkit.SharedAccessKeys)", errConfig)
	}
	if err := e.addSASKeys(c.Sbkit.SharedAccessKeys, func(i int) string {
		return cj.positionAt("Sbkit", "SharedAccessKeys", i)
	}); err != nil {
		return err
	}
	// Errors about an entity or rule name it, after its position in the file.
	for i, ns := range c.UserConfig.Namespaces {
		at := func(path ...any) string {
			return cj.positionAt(append([]any{"UserConfig", "Namespaces", i}, path...)...)
		}
		for j, q := range ns.Queues {
			o, err := q.Properties.options(at("Queues", j) + "queue " + q.Name)
			if err != nil {
				return err
			}
			if err := e.addQueue(q.Name, o); err != nil {
				return err
			}
		}
		for j, t := range ns.Topics {
			o, err := t.Properties.options(at("Topics", j) + "topic " + t.Name)
			if err != nil {
				return err
			}
			if err := e.addTopic(t.Name, o); err != nil {
				return err
			}
			for k, s := range t.Subscriptions {
				what := "subscription " + t.Name + "/" + s.Name
				o, err := s.Properties.options(at("Topics", j, "Subscriptions", k) + what)
				if err != nil {
					return err
				}
				rules := make([]admin.RuleProperties, 0, len(s.Rules))
				for l, r := range s.Rules {
					rp, err := ruleProperty(at("Topics", j, "Subscriptions", k, "Rules", l)+what, r)
					if err != nil {
						return err
					}
					rules = append(rules, rp)
				}
				if err := e.addSubscription(t.Name, s.Name, o); err != nil {
					return err
				}
				if len(s.Rules) > 0 {
					e.Rules[t.Name+"/Subscriptions/"+s.Name] = rules
				}
			}
		}
	}
	return nil
}

// configRule is a subscription rule in the configuration file: a correlation or SQL
// filter and an optional SQL action.
type configRule struct {
	Name       string
	Properties struct {
		FilterType        string
		CorrelationFilter *struct {
			ContentType, CorrelationId, Label, MessageId, ReplyTo, ReplyToSessionId, SessionId, To *string
			Properties                                                                             map[string]any
		}
		SqlFilter *struct{ SqlExpression string }
		Action    *struct{ SqlExpression string }
	}
}

// ruleProperty converts a rule of a subscription to the admin API's form. what names
// the subscription in errors.
func ruleProperty(what string, r configRule) (admin.RuleProperties, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: rule %q: %s", errConfig, what, r.Name, fmt.Sprintf(format, args...))
	}
	p := r.Properties
	rp := admin.RuleProperties{Name: r.Name}
	switch p.FilterType {
	case "Correlation":
		f := p.CorrelationFilter
		if f == nil {
			return rp, bad("FilterType Correlation without CorrelationFilter")
		}
		rp.Filter = &admin.CorrelationFilter{
			ContentType: f.ContentType, CorrelationID: f.CorrelationId, Subject: f.Label,
			MessageID: f.MessageId, ReplyTo: f.ReplyTo, ReplyToSessionID: f.ReplyToSessionId,
			SessionID: f.SessionId, To: f.To, ApplicationProperties: f.Properties,
		}
	case "Sql":
		if p.SqlFilter == nil {
			return rp, bad("FilterType Sql without SqlFilter")
		}
		rp.Filter = &admin.SQLFilter{Expression: p.SqlFilter.SqlExpression}
	default:
		return rp, bad("FilterType %q is neither Correlation nor Sql", p.FilterType)
	}
	if p.Action != nil && p.Action.SqlExpression != "" {
		rp.Action = &admin.SQLAction{Expression: p.Action.SqlExpression}
	}
	return rp, nil
}

// options converts the properties to sbtest's options. what names the entity in errors.
func (p entityProps) options(what string) (*sbtest.EntityOptions, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errConfig, what, fmt.Sprintf(format, args...))
	}
	switch {
	case p.MaxDeliveryCount < 0:
		return nil, bad("MaxDeliveryCount %d is negative", p.MaxDeliveryCount)
	}
	o := &sbtest.EntityOptions{
		MaxDeliveryCount:              p.MaxDeliveryCount,
		DeadLetterOnExpiration:        p.DeadLetteringOnMessageExpiration,
		RequiresSession:               p.RequiresSession,
		ForwardTo:                     p.ForwardTo,
		ForwardDeadLetteredMessagesTo: p.ForwardDeadLetteredMessagesTo,
	}
	var err error
	if o.LockDuration, err = parseISODuration(p.LockDuration); err != nil {
		return nil, bad("LockDuration: %v", err)
	}
	if o.DefaultTTL, err = parseISODuration(p.DefaultMessageTimeToLive); err != nil {
		return nil, bad("DefaultMessageTimeToLive: %v", err)
	}
	window, err := parseISODuration(p.DuplicateDetectionHistoryTimeWindow)
	if err != nil {
		return nil, bad("DuplicateDetectionHistoryTimeWindow: %v", err)
	}
	if p.RequiresDuplicateDetection {
		if window == 0 {
			window = defaultDuplicateWindow
		}
		o.DuplicateDetectionWindow = window
	}
	if o.LockDuration > sbtest.MaxLockDuration {
		return nil, bad("LockDuration %v is above %v", o.LockDuration, sbtest.MaxLockDuration)
	}
	return o, nil
}

// parseISODuration parses "P1D", "PT1H30M", "PT0.5S" in any letter case; "" is 0. Years
// and months have no fixed length and are refused. A duration beyond time.Duration's
// range, such as .NET's TimeSpan.MaxValue (P10675199DT2H48M5.4775807S), which the
// service reports for an unlimited DefaultMessageTimeToLive, is the longest
// time.Duration ([sbkit.MaxTTL]).
func parseISODuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, _, err := isoduration.Parse(strings.ToUpper(s))
	return d, err
}
