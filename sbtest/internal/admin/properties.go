package admin

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sbkit/sbkit"
	"github.com/sbkit/sbkit/internal/emulator/isoduration"
	"github.com/sbkit/sbkit/sbtest/internal/atom"
)

// Properties of the administration API. Modelled (they change what the namespace
// does): LockDuration, MaxDeliveryCount, DefaultMessageTimeToLive,
// DeadLetteringOnMessageExpiration, RequiresDuplicateDetection with
// DuplicateDetectionHistoryTimeWindow, RequiresSession, ForwardTo,
// ForwardDeadLetteredMessagesTo (auto-forwarding, forward.go), Status (status.go), and a
// subscription's DefaultRuleDescription. Accepted, validated and reported back as given
// (the model ignores them): AutoDeleteOnIdle (the maximum for an entity that forwards),
// MaxSizeInMegabytes (16 times it for a partitioned entity), MaxMessageSizeInKilobytes,
// EnableBatchedOperations, EnablePartitioning, SupportOrdering, UserMetadata,
// AuthorizationRules, DeadLetteringOnFilterEvaluationExceptions. RequiresSession,
// RequiresDuplicateDetection and EnablePartitioning cannot change after creation.
// AccessedAt is the last send or receive. Defaults are the service's for a Standard
// namespace (SDK live tests TestAdminClient_CreateQueue_Standard and
// TestAdminClient_QueueWithMaxValues).

const (
	defaultDupWindow   = 10 * time.Minute
	minDupWindow       = 20 * time.Second // "Duplicate detection": 20 seconds to 7 days
	maxDupWindow       = 7 * 24 * time.Hour
	minAutoDeleteIdle  = 5 * time.Minute // "AutoDeleteOnIdle": at least 5 minutes
	defaultMaxSizeMB   = 1024
	defaultMaxMsgKB    = 256
	maxMessageKB       = 102400 // Premium's largest message, 100 MB
	zeroTime           = "0001-01-01T00:00:00"
	maxSizeMBLimit     = 81920
	maxSizeMBIncrement = 1024
	maxLockDuration    = 5 * time.Minute // "Service Bus quotas": a message lock lasts at most 5 minutes
)

// bad is the service's 400 for a property value it refuses.
func bad(format string, args ...any) error {
	return httpErr(http.StatusBadRequest, "SubCode=40000. "+format, args...)
}

// durationField parses an optional duration property; capped durations (such as
// TimeSpan.MaxValue) come back as [sbkit.MaxTTL].
func durationField(name string, s *string, min, max time.Duration) (time.Duration, error) {
	if s == nil {
		return 0, nil
	}
	d, capped, err := isoduration.ParseCalendar(*s)
	if err != nil {
		return 0, bad("The value '%s' of property %s is not a valid duration.", *s, name)
	}
	if capped {
		d = sbkit.MaxTTL
	}
	if d < min || d > max {
		return 0, bad("The value '%s' of property %s is out of range [%v, %v].", *s, name, min, max)
	}
	return d, nil
}

// commonOptions reads the properties queues and subscriptions share into o.
func commonOptions(o *Options, lock, ttl *string, mdc *int32, dlExp, session *bool) error {
	var err error
	if o.LockDuration, err = durationField("LockDuration", lock, time.Second, maxLockDuration); err != nil {
		if lock != nil {
			return bad("The supplied lock time '%s' exceeds the allowed maximum of '00:05:00' or is not positive.", *lock)
		}
		return err
	}
	if o.DefaultTTL, err = durationField("DefaultMessageTimeToLive", ttl, time.Second, sbkit.MaxTTL); err != nil {
		return err
	}
	if mdc != nil {
		if *mdc < 1 {
			return bad("MaxDeliveryCount must be at least 1, not %d.", *mdc)
		}
		o.MaxDeliveryCount = int(*mdc)
	}
	o.DeadLetterOnExpiration = dlExp != nil && *dlExp
	o.RequiresSession = session != nil && *session
	return nil
}

// forwardOptions checks ForwardTo and ForwardDeadLetteredMessagesTo (names or sb://
// URIs, see forwardTarget) of the entity at self, and reads them into o.
func (a *Handler) forwardOptions(o *Options, to, dlTo *string, self string) error {
	if err := a.forwardTarget("ForwardTo", to, self); err != nil {
		return err
	}
	if err := a.forwardTarget("ForwardDeadLetteredMessagesTo", dlTo, self); err != nil {
		return err
	}
	if to != nil {
		o.ForwardTo = forwardName(*to)
	}
	if dlTo != nil {
		o.ForwardDeadLetteredMessagesTo = forwardName(*dlTo)
	}
	return nil
}

// dupOptions reads RequiresDuplicateDetection and its window (default
// defaultDupWindow) into o.
func dupOptions(o *Options, requires *bool, window *string) error {
	w, err := durationField("DuplicateDetectionHistoryTimeWindow", window, minDupWindow, maxDupWindow)
	if err != nil {
		return err
	}
	if requires != nil && *requires {
		if w == 0 {
			w = defaultDupWindow
		}
		o.DuplicateDetectionWindow = w
	}
	return nil
}

// checkReported validates the properties sbtest only reports back.
func checkReported(status, autoDelete *string, maxSizeMB *int32, maxMsgKB *int64) error {
	if status != nil && !slices.Contains(statuses, *status) {
		return bad("The value '%s' of property Status is not one of %v.", *status, statuses)
	}
	if _, err := durationField("AutoDeleteOnIdle", autoDelete, minAutoDeleteIdle, sbkit.MaxTTL); err != nil {
		return err
	}
	if maxSizeMB != nil && (*maxSizeMB < maxSizeMBIncrement || *maxSizeMB > maxSizeMBLimit || *maxSizeMB%maxSizeMBIncrement != 0) {
		return bad("The value %d of property MaxSizeInMegabytes is not a multiple of 1024 up to %d.", *maxSizeMB, maxSizeMBLimit)
	}
	if maxMsgKB != nil && (*maxMsgKB < 1 || *maxMsgKB > maxMessageKB) {
		return bad("The value %d of property MaxMessageSizeInKilobytes is out of range [1, %d].", *maxMsgKB, maxMessageKB)
	}
	return nil
}

// Limits on what the admin API keeps of a description it only reports back:
// UserMetadata of at most 1,024 characters (the .NET SDK's administration client,
// QueueProperties.UserMetadata: "Max length is 1024 chars"; the same for topics and
// subscriptions), at most 12 authorization rules per entity (Service Bus quotas, shared
// access authorization rules), each with a key name, keys and claim of at most 256
// characters (the .NET SDK's SharedAccessSignature: MaximumKeyNameLength and
// MaximumKeyLength, 256) and at most the three rights.
const (
	maxUserMetadata = 1024
	maxAuthRules    = 12
	maxAuthField    = 256
	maxAuthRights   = 3
)

// The service's quotas on what the admin API creates (Service Bus quotas): 10,000 queues
// and topics per namespace (Basic and Standard tiers), 2,000 subscriptions per topic.
// The model does not enforce them; the admin API, which any client can reach, does.
const (
	MaxEntities      = 10000
	MaxSubscriptions = 2000
)

// quotaExceeded refuses a create beyond a quota: 403, as the service refuses an
// operation on a resource it will not allow.
func quotaExceeded(format string, args ...any) error {
	return httpErr(http.StatusForbidden, format, args...)
}

// entityQuota refuses a new queue or topic once the namespace has MaxEntities.
func entityQuota(m Model) error {
	if n := m.Entities(); n >= MaxEntities {
		return quotaExceeded("The namespace already has %d queues and topics, the most a namespace can have.", n)
	}
	return nil
}

// checkKept validates the reported-only properties whose size the admin API keeps.
func checkKept(userMetadata *string, rules *[]atom.AuthorizationRule) error {
	if userMetadata != nil && utf8.RuneCountInString(*userMetadata) > maxUserMetadata {
		return bad("The value of property UserMetadata is longer than %d characters.", maxUserMetadata)
	}
	if rules == nil {
		return nil
	}
	if len(*rules) > maxAuthRules {
		return bad("An entity can have at most %d authorization rules, not %d.", maxAuthRules, len(*rules))
	}
	for _, r := range *rules {
		if len(r.Rights) > maxAuthRights {
			return bad("An authorization rule has at most %d rights, not %d.", maxAuthRights, len(r.Rights))
		}
		for _, f := range []*string{&r.ClaimType, &r.ClaimValue, r.KeyName, r.PrimaryKey, r.SecondaryKey} {
			if f != nil && utf8.RuneCountInString(*f) > maxAuthField {
				return bad("An authorization rule's key name, keys and claim have at most %d characters.", maxAuthField)
			}
		}
	}
	return nil
}

// forwardTarget checks a ForwardTo value: the name (or sb://host/name URI) of an
// existing queue or topic other than self, in any letter case ("Naming rules and
// restrictions for Azure resources": names are case-insensitive).
func (a *Handler) forwardTarget(field string, v *string, self string) error {
	if v == nil || *v == "" {
		return nil
	}
	name := forwardName(*v)
	if strings.EqualFold(name, self) {
		return bad("The %s property cannot point to the entity itself ('%s').", field, *v)
	}
	if _, ok := a.model.Topic(name); ok {
		return nil
	}
	if _, ok := a.model.Queue(name); ok {
		return nil
	}
	return bad("The entity '%s' in property %s does not exist.", *v, field)
}

// forwardName turns "sb://host/name" (how SDK live test TestAdminClient_Forwarding writes
// it, and reads it back unchanged) or "name" into the entity name: the path of the URI,
// without surrounding slashes.
func forwardName(v string) string {
	if _, rest, ok := strings.Cut(v, "://"); ok {
		_, v, _ = strings.Cut(rest, "/")
	}
	return strings.Trim(v, "/")
}

// reportDuration writes d into *p unless *p already says the same (so "PT45S" and
// TimeSpan.MaxValue come back exactly as sent).
func reportDuration(p **string, d time.Duration) {
	if *p != nil {
		if sd, capped, err := isoduration.ParseCalendar(**p); err == nil && (sd == d || capped && d == sbkit.MaxTTL) {
			return
		}
	}
	s := atom.MaxTimeSpan
	if d < sbkit.MaxTTL {
		s = isoduration.Format(d)
	}
	*p = &s
}

// def sets *p to v when it is nil.
func def[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}

// partitions is how many partitions of MaxSizeInMegabytes each the service gives a
// partitioned entity of the Standard tier; the admin API reports their total (SDK live
// tests TestAdminClient_CreateQueue_Standard, TestAdminClient_QueueWithMaxValues).
const partitions = 16

// reportSize reports MaxSizeInMegabytes, kept per partition, as the service does.
func reportSize(size **int32, partitioned *bool) {
	def(size, defaultMaxSizeMB)
	if partitioned != nil && *partitioned {
		*size = ptr(**size * partitions)
	}
}

// fixedAtCreation refuses an update that changes what the service fixes when an entity
// is created: duplicate detection ("Enable duplicate message detection": "You can't
// enable or disable duplicate detection after the queue or topic is created") and
// partitioning (SDK live test TestAdminClient_UpdateTopic: "Partitioning cannot be
// changed for Topic."). For a partitioned entity it takes the MaxSizeInMegabytes the
// client read back (reportSize) as the size of a partition it was: prevSize.
func fixedAtCreation(kind string, hadDup, hadPart bool, prevSize *int32, dup, part *bool, size **int32) error {
	if (dup != nil && *dup) != hadDup {
		return bad("The value for the RequiresDuplicateDetection property of an existing %s cannot be changed.", kind)
	}
	if (part != nil && *part) != hadPart {
		return bad("Partitioning cannot be changed for %s. ", kind)
	}
	if hadPart && *size != nil {
		per := int32(defaultMaxSizeMB)
		if prevSize != nil {
			per = *prevSize
		}
		if **size == per*partitions {
			*size = ptr(per)
		}
	}
	return nil
}

// reportAutoDelete reports AutoDeleteOnIdle: an entity that auto-forwards is never idle
// and reports the maximum ("Chaining Service Bus entities with autoforwarding": "the
// value for AutoDeleteOnIdle on the source entity is automatically set to the maximum
// value of the data type").
func reportAutoDelete(autoDelete **string, o Options) {
	if o.ForwardTo != "" {
		*autoDelete = ptr(atom.MaxTimeSpan)
	}
	def(autoDelete, atom.MaxTimeSpan)
}

// accessedStamp reports an entity's AccessedAt: the zero time until it is used.
func accessedStamp(t time.Time) string {
	if t.IsZero() {
		return zeroTime
	}
	return stamp(t)
}

// countDetails reports an entity's counts by subqueue (transfer queues are always
// empty): active messages are the available, locked and deferred ones, as the service
// counts them. The count details have no deferred counter, and MessageCount is the sum
// of the details ("Get message counters",
// learn.microsoft.com/azure/service-bus-messaging/message-counters), so a deferred
// message is counted with the active ones.
func countDetails(c Counts) *atom.CountDetails {
	return atom.NewCountDetails(int32(c.Active+c.Locked+c.Deferred), int32(c.DeadLetter), int32(c.Scheduled))
}

// messageCount is an entity's MessageCount: every message of the entity and of its
// dead-letter queue.
func messageCount(c Counts) *int64 {
	return ptr(int64(c.Active + c.Locked + c.Deferred + c.Scheduled + c.DeadLetter))
}

// reportCommon writes the modelled properties queues and subscriptions share.
func reportCommon(o Options, lock, ttl **string, mdc **int32, dlExp, session **bool) {
	reportDuration(lock, o.LockDuration)
	reportDuration(ttl, o.DefaultTTL)
	*mdc = ptr(int32(o.MaxDeliveryCount))
	*dlExp = ptr(o.DeadLetterOnExpiration)
	*session = ptr(o.RequiresSession)
}

// reportDup writes duplicate detection; the window keeps its last value (or the default)
// when detection is off.
func reportDup(o Options, requires **bool, window **string) {
	*requires = ptr(o.DuplicateDetectionWindow > 0)
	if o.DuplicateDetectionWindow > 0 {
		reportDuration(window, o.DuplicateDetectionWindow)
	}
	def(window, isoduration.Format(defaultDupWindow))
}

// statusOf reads an optional Status property (already validated by checkReported).
func statusOf(s *string) string {
	if s == nil {
		return "Active"
	}
	return *s
}

// Entity naming rules ("Service Bus quotas" and the entity naming rules of the management
// API): queue and topic names of letters, digits, periods, hyphens, underscores and
// slashes, at most 260 characters, starting and ending with a letter or digit;
// subscription names the same without slashes, at most 50.
var (
	entityNameRE       = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._/-]*[A-Za-z0-9])?$`)
	subscriptionNameRE = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$`)
)

const (
	entityNameMaxLen       = 260
	subscriptionNameMaxLen = 50
)

// checkName refuses a name of the kind ("queue", "topic", "subscription") that does not
// match re, is longer than maxLen or holds an empty path segment.
func checkName(kind, name string, re *regexp.Regexp, maxLen int) error {
	if len(name) > maxLen || !re.MatchString(name) || strings.Contains(name, "//") {
		return bad("The %s name '%s' is invalid: use letters, digits, periods, hyphens and underscores, at most %d characters, starting and ending with a letter or digit.", kind, name, maxLen)
	}
	return nil
}
