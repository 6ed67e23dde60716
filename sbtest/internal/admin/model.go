package admin

import (
	"errors"
	"time"

	sdkadmin "github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
)

// Model is the namespace the API manages. sbtest's Namespace is one, through the
// adapter in sbtest/seam_admin.go, which calls only its exported methods. The methods
// are safe for concurrent use. Names are matched in any letter case.
type Model interface {
	// Queue returns the queue called name.
	Queue(name string) (Entity, bool)
	// Topic returns the topic called name.
	Topic(name string) (Topic, bool)
	// Queues and Topics return every queue and every topic, sorted by name.
	Queues() []Entity
	Topics() []Topic
	// Entities returns how many queues and topics there are.
	Entities() int
	// NewQueue and NewTopic create a queue or a topic (ErrExists when the name is
	// taken by either).
	NewQueue(name string, o *Options) (Entity, error)
	NewTopic(name string, o *Options) (Topic, error)
	// DeleteQueue and DeleteTopic delete a queue, or a topic with its subscriptions
	// (ErrNotFound when there is none).
	DeleteQueue(name string) error
	DeleteTopic(name string) error
}

// Entity is a queue or a subscription.
type Entity interface {
	// Name returns its path: "queue" or "topic/Subscriptions/sub".
	Name() string
	// ID returns a comparable value that names this entity and no other, not even one
	// created later under the same name, and does not keep it alive: what the API keeps
	// about an entity must not hold a deleted one with its messages.
	ID() any
	// Options and SetOptions read and change what the model does with it (SetOptions
	// refuses a change of RequiresSession).
	Options() Options
	SetOptions(o *Options) error
	// Status and SetStatus read and change its status (Status values).
	Status() string
	SetStatus(s string) error
	// Counts returns its message counts; AccessedAt the last send or receive (the zero
	// time before either).
	Counts() Counts
	AccessedAt() time.Time
	// Rule, Rules, CreateRule, UpdateRule and DeleteRule manage a subscription's rules
	// (ErrNotFound for a rule that does not exist, ErrExists for a name taken).
	Rule(name string) (sdkadmin.RuleProperties, bool)
	Rules() []sdkadmin.RuleProperties
	CreateRule(r sdkadmin.RuleProperties) error
	UpdateRule(r sdkadmin.RuleProperties) error
	DeleteRule(name string) error
}

// Topic is a topic.
type Topic interface {
	// Name returns its name.
	Name() string
	// ID as for an Entity.
	ID() any
	// Options, SetOptions, Status, SetStatus and AccessedAt as for an Entity; of the
	// options only DefaultTTL and DuplicateDetectionWindow apply to a topic.
	Options() Options
	SetOptions(o *Options) error
	Status() string
	SetStatus(s string) error
	AccessedAt() time.Time
	// Subscription returns its subscription called name; Subscriptions every one, in
	// creation order.
	Subscription(name string) (Entity, bool)
	Subscriptions() []Entity
	// NewSubscription creates a subscription (ErrExists when the name is taken), with
	// o.DefaultRule as its only rule when it is set; DeleteSubscription deletes one
	// (ErrNotFound when there is none).
	NewSubscription(name string, o *Options) (Entity, error)
	DeleteSubscription(name string) error
}

// Options are the properties of an entity the model acts on: sbtest.EntityOptions,
// field for field (the adapter converts one into the other), where each is documented.
// Zero values mean the model's defaults.
type Options struct {
	LockDuration                  time.Duration
	MaxDeliveryCount              int
	DefaultTTL                    time.Duration
	DeadLetterOnExpiration        bool
	DuplicateDetectionWindow      time.Duration
	RequiresSession               bool
	ForwardTo                     string
	ForwardDeadLetteredMessagesTo string
	DefaultRule                   *sdkadmin.RuleProperties
}

// Counts are an entity's message counts: sbtest.Counts, field for field.
type Counts struct {
	Active, Locked, Deferred, Scheduled, DeadLetter int
	Size                                            int64
}

// The model's errors the API answers with their own statuses (errors.Is): 404 and 409.
// Any other error of the model is a value the API refuses with 400.
var (
	ErrNotFound = errors.New("admin: not found")
	ErrExists   = errors.New("admin: already exists")
)

// Status values of an entity ("Service Bus entity status").
var statuses = []string{"Active", "Disabled", "SendDisabled", "ReceiveDisabled"}
