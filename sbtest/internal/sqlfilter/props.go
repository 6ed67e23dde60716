package sqlfilter

import "strings"

// Message is what a filter reads: the system and user properties of one message.
// Property returns the value of the system property (sys true; name is one of the
// canonical names listed by [SystemProperties]) or of the user property name, and
// whether it is set. Values may be any Go type; ints, uints and float32 are widened to
// int64 and float64, and types the language has no literal for (time.Time aside) are
// only equal to nothing.
type Message interface {
	Property(sys bool, name string) (v any, ok bool)
}

// MutableMessage is what an action changes.
type MutableMessage interface {
	Message
	// SetProperty sets a user property, or a settable system property to a string
	// (or nil for unset).
	SetProperty(sys bool, name string, v any)
	// RemoveProperty removes a user property.
	RemoveProperty(name string)
}

// Properties is a map-backed MutableMessage: Sys holds system properties by canonical
// name, User the user properties. Nil maps are created on first write.
type Properties struct {
	Sys  map[string]any
	User map[string]any
}

// Property implements [Message].
func (p *Properties) Property(sys bool, name string) (any, bool) {
	m := p.User
	if sys {
		m = p.Sys
	}
	v, ok := m[name]
	return v, ok
}

// SetProperty implements [MutableMessage].
func (p *Properties) SetProperty(sys bool, name string, v any) {
	m := &p.User
	if sys {
		m = &p.Sys
	}
	if *m == nil {
		*m = make(map[string]any)
	}
	(*m)[name] = v
}

// RemoveProperty implements [MutableMessage].
func (p *Properties) RemoveProperty(name string) { delete(p.User, name) }

// sysProps maps the lower-cased system property names of seed 004 ("Messages, payloads,
// and serialization") to their canonical spelling; Subject is the newer name of Label.
// The value says whether an action may SET it.
var sysProps = map[string]struct {
	name     string
	settable bool
}{}

func init() {
	for _, n := range []string{"ContentType", "CorrelationId", "Label", "MessageId", "PartitionKey",
		"ReplyTo", "ReplyToSessionId", "SessionId", "To", "ViaPartitionKey"} {
		sysProps[strings.ToLower(n)] = struct {
			name     string
			settable bool
		}{n, true}
	}
	for _, n := range []string{"DeadLetterSource", "DeliveryCount", "EnqueuedSequenceNumber",
		"EnqueuedTimeUtc", "ExpiresAtUtc", "LockedUntilUtc", "LockToken", "ScheduledEnqueueTimeUtc",
		"SequenceNumber", "Size", "TimeToLive"} {
		sysProps[strings.ToLower(n)] = struct {
			name     string
			settable bool
		}{n, false}
	}
	sysProps["subject"] = sysProps["label"]
}

// SystemProperties returns the canonical names of the system properties a filter may
// read (sys.Subject is an alias of sys.Label).
func SystemProperties() []string {
	var out []string
	for k, v := range sysProps {
		if k != "subject" {
			out = append(out, v.name)
		}
	}
	return out
}

// canonicalSys returns the canonical name of a system property, case-insensitively.
func canonicalSys(name string) (string, bool, bool) {
	p, ok := sysProps[strings.ToLower(name)]
	return p.name, p.settable, ok
}
