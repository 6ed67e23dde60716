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
// name, User the user properties. Nil maps are created on first write. User property
// names are looked up as [Fold] does.
type Properties struct {
	Sys  map[string]any
	User map[string]any

	fold Fold // of User
}

// Property implements [Message].
func (p *Properties) Property(sys bool, name string) (any, bool) {
	if sys {
		v, ok := p.Sys[name]
		return v, ok
	}
	key, ok := p.fold.Key(p.User, name)
	return p.User[key], ok
}

// SetProperty implements [MutableMessage]: a user property that exists in another
// letter case is replaced under its name.
func (p *Properties) SetProperty(sys bool, name string, v any) {
	m := &p.User
	if sys {
		m = &p.Sys
	} else if key, ok := p.fold.Key(p.User, name); ok {
		name = key
	} else {
		p.fold.add(name)
	}
	if *m == nil {
		*m = make(map[string]any)
	}
	(*m)[name] = v
}

// RemoveProperty implements [MutableMessage].
func (p *Properties) RemoveProperty(name string) {
	if key, ok := p.fold.Key(p.User, name); ok {
		delete(p.User, key)
		p.fold = Fold{}
	}
}

// Fold finds user properties by name with letter case ignored, as the service does
// ("Subscription Rule SQL Filter Syntax", considerations: "Property names are
// case-insensitive"): a name that matches exactly wins, then the first of the names
// equal to it when case is ignored, in sorted order. Its index of lower-cased names is
// built on the first lookup that needs it, so a message costs one pass over its
// properties however many names a filter reads. The zero value is ready to use; it
// must be reset (to the zero value) when a property is removed.
type Fold struct {
	index map[string]string // lower-cased name -> name
	built bool
}

// Key returns the name of the property of m that name names, and whether there is one.
func (f *Fold) Key(m map[string]any, name string) (string, bool) {
	if _, ok := m[name]; ok {
		return name, true
	}
	if len(m) == 0 {
		return "", false
	}
	if !f.built {
		f.index = make(map[string]string, len(m))
		for k := range m {
			if cur, ok := f.index[strings.ToLower(k)]; !ok || k < cur {
				f.index[strings.ToLower(k)] = k
			}
		}
		f.built = true
	}
	key, ok := f.index[strings.ToLower(name)]
	return key, ok
}

// add records a new property name in a built index.
func (f *Fold) add(name string) {
	if !f.built {
		return
	}
	l := strings.ToLower(name)
	if cur, ok := f.index[l]; !ok || name < cur {
		f.index[l] = name
	}
}

// sysProps maps the lower-cased system property names of "Messages, payloads, and
// serialization" to their canonical spelling; Subject is the newer name of Label.
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
