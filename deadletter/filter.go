package deadletter

import (
	"fmt"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// Filter selects dead-lettered messages. A message matches when it passes every
// criterion that is set; the zero Filter (and a nil *Filter) matches every message.
// A Filter is read-only once in use and then safe for concurrent use.
type Filter struct {
	// Reasons matches a message whose DeadLetterReason is one of them (exactly, case
	// included). Empty: any reason, none included.
	Reasons []string

	// DescriptionContains matches a message whose DeadLetterErrorDescription contains it.
	// Empty: any description.
	DescriptionContains string

	// EnqueuedAfter and EnqueuedBefore bound the message's EnqueuedTime (after is
	// inclusive, before exclusive). Zero: no bound.
	EnqueuedAfter, EnqueuedBefore time.Time

	// Properties matches a message whose application property of each name, formatted
	// with fmt's %v, equals the value given. Empty: any properties.
	Properties map[string]string

	// MessageIDs matches a message whose MessageID is one of them. Empty: any ID.
	MessageIDs []string

	// Match, when not nil, is a further criterion of your own. It must be fast and must
	// not modify the message.
	Match func(*azservicebus.ReceivedMessage) bool
}

// Matches reports whether m passes every criterion of f. A nil f matches everything.
func (f *Filter) Matches(m *azservicebus.ReceivedMessage) bool {
	if f == nil {
		return true
	}
	if len(f.Reasons) > 0 {
		if m.DeadLetterReason == nil || !contains(f.Reasons, *m.DeadLetterReason) {
			return false
		}
	}
	if f.DescriptionContains != "" {
		if m.DeadLetterErrorDescription == nil || !strings.Contains(*m.DeadLetterErrorDescription, f.DescriptionContains) {
			return false
		}
	}
	if !f.EnqueuedAfter.IsZero() || !f.EnqueuedBefore.IsZero() {
		if m.EnqueuedTime == nil {
			return false
		}
		if !f.EnqueuedAfter.IsZero() && m.EnqueuedTime.Before(f.EnqueuedAfter) {
			return false
		}
		if !f.EnqueuedBefore.IsZero() && !m.EnqueuedTime.Before(f.EnqueuedBefore) {
			return false
		}
	}
	for k, want := range f.Properties {
		v, ok := m.ApplicationProperties[k]
		if !ok || fmt.Sprint(v) != want {
			return false
		}
	}
	if len(f.MessageIDs) > 0 && !contains(f.MessageIDs, m.MessageID) {
		return false
	}
	if f.Match != nil && !f.Match(m) {
		return false
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
