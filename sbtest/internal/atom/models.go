package atom

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxTimeSpan is .NET's TimeSpan.MaxValue as the service writes it: the "infinite"
// duration of DefaultMessageTimeToLive and AutoDeleteOnIdle (SDK live test
// TestAdminClient_QueueWithMaxValues).
const MaxTimeSpan = "P10675199DT2H48M5.4775807S"

// Namespaces of the documents.
const (
	NSAtom       = "http://www.w3.org/2005/Atom"
	NSServiceBus = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
	NSInstance   = "http://www.w3.org/2001/XMLSchema-instance"
	NSSchema     = "http://www.w3.org/2001/XMLSchema"
)

// Entry is one Atom entry: a request body, or one entity in a response.
type Entry struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom entry"`
	ID      string   `xml:"id,omitempty"`
	Title   *Title   `xml:"title,omitempty"`
	Updated string   `xml:"updated,omitempty"`
	Link    *Link    `xml:"link,omitempty"`
	Content Content  `xml:"content"`
}

// Title is an entry's or feed's title: the entity's name.
type Title struct {
	Type string `xml:"type,attr,omitempty"`
	Text string `xml:",chardata"`
}

// Link is an Atom link.
type Link struct {
	Rel  string `xml:"rel,attr"`
	HREF string `xml:"href,attr"`
}

// Content holds exactly one description.
type Content struct {
	Type         string                   `xml:"type,attr"`
	Queue        *QueueDescription        `xml:"QueueDescription,omitempty"`
	Topic        *TopicDescription        `xml:"TopicDescription,omitempty"`
	Subscription *SubscriptionDescription `xml:"SubscriptionDescription,omitempty"`
	Rule         *RuleDescription         `xml:"RuleDescription,omitempty"`
	Namespace    *NamespaceInfo           `xml:"NamespaceInfo,omitempty"`
}

// Feed is a list of entries, the answer to a list request.
type Feed struct {
	XMLName xml.Name `xml:"http://www.w3.org/2005/Atom feed"`
	ID      string   `xml:"id"`
	Title   Title    `xml:"title"`
	Updated string   `xml:"updated,omitempty"`
	Entries []Entry  `xml:"entry"`
}

// AuthorizationRule is a shared access rule of a queue or topic, reported back as given.
type AuthorizationRule struct {
	Type         string   `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
	ClaimType    string   `xml:"ClaimType"`
	ClaimValue   string   `xml:"ClaimValue"`
	Rights       []string `xml:"Rights>AccessRights"`
	KeyName      *string  `xml:"KeyName,omitempty"`
	CreatedTime  *string  `xml:"CreatedTime,omitempty"`
	ModifiedTime *string  `xml:"ModifiedTime,omitempty"`
	PrimaryKey   *string  `xml:"PrimaryKey,omitempty"`
	SecondaryKey *string  `xml:"SecondaryKey,omitempty"`
}

// CountDetailsNamespace is the namespace of CountDetails' elements, which the service
// writes with the prefix d2p1.
const CountDetailsNamespace = "http://schemas.microsoft.com/netservices/2011/06/servicebus"

// CountDetails are an entity's message counts, encoded as the service writes them: the
// elements prefixed d2p1 and the prefix declared on CountDetails (the JavaScript admin
// client reads the counts through that one declared prefix: @azure/service-bus 7.9.5
// getMessageCountDetails; the Go client ignores prefixes). Set XMLNS to
// CountDetailsNamespace; NewCountDetails does.
type CountDetails struct {
	XMLNS                          string `xml:"xmlns:d2p1,attr"`
	ActiveMessageCount             int32  `xml:"d2p1:ActiveMessageCount"`
	DeadLetterMessageCount         int32  `xml:"d2p1:DeadLetterMessageCount"`
	ScheduledMessageCount          int32  `xml:"d2p1:ScheduledMessageCount"`
	TransferMessageCount           int32  `xml:"d2p1:TransferMessageCount"`
	TransferDeadLetterMessageCount int32  `xml:"d2p1:TransferDeadLetterMessageCount"`
}

// NewCountDetails returns counts with the namespace declaration set.
func NewCountDetails(active, deadLetter, scheduled int32) *CountDetails {
	return &CountDetails{XMLNS: CountDetailsNamespace, ActiveMessageCount: active,
		DeadLetterMessageCount: deadLetter, ScheduledMessageCount: scheduled}
}

// QueueDescription describes a queue. Pointer fields are absent when nil.
type QueueDescription struct {
	XMLName                             xml.Name             `xml:"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect QueueDescription"`
	LockDuration                        *string              `xml:"LockDuration,omitempty"`
	MaxSizeInMegabytes                  *int32               `xml:"MaxSizeInMegabytes,omitempty"`
	RequiresDuplicateDetection          *bool                `xml:"RequiresDuplicateDetection,omitempty"`
	RequiresSession                     *bool                `xml:"RequiresSession,omitempty"`
	DefaultMessageTimeToLive            *string              `xml:"DefaultMessageTimeToLive,omitempty"`
	DeadLetteringOnMessageExpiration    *bool                `xml:"DeadLetteringOnMessageExpiration,omitempty"`
	DuplicateDetectionHistoryTimeWindow *string              `xml:"DuplicateDetectionHistoryTimeWindow,omitempty"`
	MaxDeliveryCount                    *int32               `xml:"MaxDeliveryCount,omitempty"`
	EnableBatchedOperations             *bool                `xml:"EnableBatchedOperations,omitempty"`
	SizeInBytes                         *int64               `xml:"SizeInBytes,omitempty"`
	MessageCount                        *int64               `xml:"MessageCount,omitempty"`
	AuthorizationRules                  *[]AuthorizationRule `xml:"AuthorizationRules>AuthorizationRule,omitempty"`
	Status                              *string              `xml:"Status,omitempty"`
	CreatedAt                           string               `xml:"CreatedAt,omitempty"`
	UpdatedAt                           string               `xml:"UpdatedAt,omitempty"`
	AccessedAt                          string               `xml:"AccessedAt,omitempty"`
	AutoDeleteOnIdle                    *string              `xml:"AutoDeleteOnIdle,omitempty"`
	EnablePartitioning                  *bool                `xml:"EnablePartitioning,omitempty"`
	EntityAvailabilityStatus            *string              `xml:"EntityAvailabilityStatus,omitempty"`
	EnableExpress                       *bool                `xml:"EnableExpress,omitempty"`
	CountDetails                        *CountDetails        `xml:"CountDetails,omitempty"`
	ForwardTo                           *string              `xml:"ForwardTo,omitempty"`
	ForwardDeadLetteredMessagesTo       *string              `xml:"ForwardDeadLetteredMessagesTo,omitempty"`
	UserMetadata                        *string              `xml:"UserMetadata,omitempty"`
	MaxMessageSizeInKilobytes           *int64               `xml:"MaxMessageSizeInKilobytes,omitempty"`
}

// TopicDescription describes a topic.
type TopicDescription struct {
	XMLName                             xml.Name             `xml:"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect TopicDescription"`
	DefaultMessageTimeToLive            *string              `xml:"DefaultMessageTimeToLive,omitempty"`
	MaxSizeInMegabytes                  *int32               `xml:"MaxSizeInMegabytes,omitempty"`
	RequiresDuplicateDetection          *bool                `xml:"RequiresDuplicateDetection,omitempty"`
	DuplicateDetectionHistoryTimeWindow *string              `xml:"DuplicateDetectionHistoryTimeWindow,omitempty"`
	EnableBatchedOperations             *bool                `xml:"EnableBatchedOperations,omitempty"`
	SizeInBytes                         *int64               `xml:"SizeInBytes,omitempty"`
	AuthorizationRules                  *[]AuthorizationRule `xml:"AuthorizationRules>AuthorizationRule,omitempty"`
	Status                              *string              `xml:"Status,omitempty"`
	UserMetadata                        *string              `xml:"UserMetadata,omitempty"`
	CreatedAt                           string               `xml:"CreatedAt,omitempty"`
	UpdatedAt                           string               `xml:"UpdatedAt,omitempty"`
	AccessedAt                          string               `xml:"AccessedAt,omitempty"`
	SupportOrdering                     *bool                `xml:"SupportOrdering,omitempty"`
	AutoDeleteOnIdle                    *string              `xml:"AutoDeleteOnIdle,omitempty"`
	EnablePartitioning                  *bool                `xml:"EnablePartitioning,omitempty"`
	EntityAvailabilityStatus            *string              `xml:"EntityAvailabilityStatus,omitempty"`
	EnableExpress                       *bool                `xml:"EnableExpress,omitempty"`
	CountDetails                        *CountDetails        `xml:"CountDetails,omitempty"`
	SubscriptionCount                   *int32               `xml:"SubscriptionCount,omitempty"`
	SQLFilterCount                      *int32               `xml:"SqlFilterCount,omitempty"`
	CorrelationFilterCount              *int32               `xml:"CorrelationFilterCount,omitempty"`
	MaxMessageSizeInKilobytes           *int64               `xml:"MaxMessageSizeInKilobytes,omitempty"`
}

// SubscriptionDescription describes a subscription.
type SubscriptionDescription struct {
	XMLName                                   xml.Name      `xml:"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect SubscriptionDescription"`
	LockDuration                              *string       `xml:"LockDuration,omitempty"`
	RequiresSession                           *bool         `xml:"RequiresSession,omitempty"`
	DefaultMessageTimeToLive                  *string       `xml:"DefaultMessageTimeToLive,omitempty"`
	DeadLetteringOnMessageExpiration          *bool         `xml:"DeadLetteringOnMessageExpiration,omitempty"`
	DeadLetteringOnFilterEvaluationExceptions *bool         `xml:"DeadLetteringOnFilterEvaluationExceptions,omitempty"`
	DefaultRuleDescription                    *RuleBody     `xml:"DefaultRuleDescription,omitempty"`
	MaxDeliveryCount                          *int32        `xml:"MaxDeliveryCount,omitempty"`
	MessageCount                              *int64        `xml:"MessageCount,omitempty"`
	EnableBatchedOperations                   *bool         `xml:"EnableBatchedOperations,omitempty"`
	Status                                    *string       `xml:"Status,omitempty"`
	ForwardTo                                 *string       `xml:"ForwardTo,omitempty"`
	UserMetadata                              *string       `xml:"UserMetadata,omitempty"`
	ForwardDeadLetteredMessagesTo             *string       `xml:"ForwardDeadLetteredMessagesTo,omitempty"`
	AutoDeleteOnIdle                          *string       `xml:"AutoDeleteOnIdle,omitempty"`
	CreatedAt                                 string        `xml:"CreatedAt,omitempty"`
	UpdatedAt                                 string        `xml:"UpdatedAt,omitempty"`
	AccessedAt                                string        `xml:"AccessedAt,omitempty"`
	CountDetails                              *CountDetails `xml:"CountDetails,omitempty"`
	EntityAvailabilityStatus                  *string       `xml:"EntityAvailabilityStatus,omitempty"`
}

// RuleDescription describes a rule.
type RuleDescription struct {
	XMLName xml.Name `xml:"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect RuleDescription"`
	RuleBody
}

// RuleBody is the content of a rule, alone as the DefaultRuleDescription of a
// subscription created with a default rule.
type RuleBody struct {
	Filter    *Filter `xml:"Filter,omitempty"`
	Action    *Action `xml:"Action,omitempty"`
	CreatedAt string  `xml:"CreatedAt,omitempty"`
	Name      string  `xml:"Name,omitempty"`
}

// Filter is a rule's filter. Type is SqlFilter, TrueFilter, FalseFilter or
// CorrelationFilter.
type Filter struct {
	Type             string        `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
	SQLExpression    *string       `xml:"SqlExpression,omitempty"`
	CorrelationID    *string       `xml:"CorrelationId,omitempty"`
	MessageID        *string       `xml:"MessageId,omitempty"`
	To               *string       `xml:"To,omitempty"`
	ReplyTo          *string       `xml:"ReplyTo,omitempty"`
	Label            *string       `xml:"Label,omitempty"`
	SessionID        *string       `xml:"SessionId,omitempty"`
	ReplyToSessionID *string       `xml:"ReplyToSessionId,omitempty"`
	ContentType      *string       `xml:"ContentType,omitempty"`
	Properties       *KeyValueList `xml:"Properties,omitempty"`
	Parameters       *KeyValueList `xml:"Parameters,omitempty"`
}

// Action is a rule's action. Type is SqlRuleAction or EmptyRuleAction.
type Action struct {
	Type          string        `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
	SQLExpression *string       `xml:"SqlExpression,omitempty"`
	Parameters    *KeyValueList `xml:"Parameters,omitempty"`
}

// KeyValueList is a list of typed values: SQL parameters and correlation filter
// properties.
type KeyValueList struct {
	Items []KeyValue `xml:"KeyValueOfstringanyType"`
}

// KeyValue is one typed value.
type KeyValue struct {
	Key   string `xml:"Key"`
	Value Value  `xml:"Value"`
}

// Value is an XML Schema typed value: Type is "prefix:string" (or int, long, double,
// boolean, dateTime).
type Value struct {
	Type   string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
	Prefix string `xml:"xmlns:d6p1,attr,omitempty"`
	Text   string `xml:",chardata"`
}

// NamespaceInfo describes the namespace.
type NamespaceInfo struct {
	XMLName        xml.Name `xml:"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect NamespaceInfo"`
	CreatedTime    string   `xml:"CreatedTime"`
	MessagingSKU   string   `xml:"MessagingSKU"`
	MessagingUnits *int64   `xml:"MessagingUnits,omitempty"`
	ModifiedTime   string   `xml:"ModifiedTime"`
	Name           string   `xml:"Name"`
	NamespaceType  string   `xml:"NamespaceType"`
}

// Error is the body of a failed request.
type Error struct {
	XMLName xml.Name `xml:"Error"`
	Code    int      `xml:"Code"`
	Detail  string   `xml:"Detail"`
}

// DecodeValues turns a KeyValueList into Go values: string, bool, int64 (int and long),
// float64, [time.Time]. A nil or empty list gives nil.
func DecodeValues(l *KeyValueList) (map[string]any, error) {
	if l == nil || len(l.Items) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(l.Items))
	for _, kv := range l.Items {
		typ := kv.Value.Type
		if i := strings.LastIndexByte(typ, ':'); i >= 0 {
			typ = typ[i+1:]
		}
		var v any
		var err error
		switch typ {
		case "string":
			v = kv.Value.Text
		case "boolean":
			v, err = strconv.ParseBool(kv.Value.Text)
		case "int", "long", "short", "byte":
			v, err = strconv.ParseInt(kv.Value.Text, 10, 64)
		case "double", "float", "decimal":
			v, err = strconv.ParseFloat(kv.Value.Text, 64)
		case "dateTime":
			var t time.Time
			t, err = time.Parse(time.RFC3339Nano, kv.Value.Text)
			v = t.UTC()
		default:
			err = fmt.Errorf("unsupported type %q", kv.Value.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("atom: value of %q: %w", kv.Key, err)
		}
		out[kv.Key] = v
	}
	return out, nil
}

// EncodeValues is the inverse of DecodeValues; other integer and float types are
// widened. It returns nil for an empty map and an error for a type the format lacks.
func EncodeValues(m map[string]any) (*KeyValueList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	l := &KeyValueList{}
	for k, v := range m {
		var typ, text string
		switch x := v.(type) {
		case string:
			typ, text = "string", x
		case bool:
			typ, text = "boolean", strconv.FormatBool(x)
		case int:
			typ, text = "int", strconv.FormatInt(int64(x), 10)
		case int32:
			typ, text = "int", strconv.FormatInt(int64(x), 10)
		case int64:
			typ, text = "int", strconv.FormatInt(x, 10)
		case float32:
			typ, text = "double", strconv.FormatFloat(float64(x), 'g', -1, 64)
		case float64:
			typ, text = "double", strconv.FormatFloat(x, 'g', -1, 64)
		case time.Time:
			typ, text = "dateTime", x.UTC().Format(time.RFC3339Nano)
		default:
			return nil, fmt.Errorf("atom: value of %q has unsupported type %T", k, v)
		}
		l.Items = append(l.Items, KeyValue{Key: k, Value: Value{Type: "d6p1:" + typ, Prefix: NSSchema, Text: text}})
	}
	return l, nil
}
