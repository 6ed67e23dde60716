package amqp

import "fmt"

// Descriptor codes of the performatives and their parts (AMQP 1.0 part 2 and 3).
const (
	CodeOpen        uint64 = 0x10
	CodeBegin       uint64 = 0x11
	CodeAttach      uint64 = 0x12
	CodeFlow        uint64 = 0x13
	CodeTransfer    uint64 = 0x14
	CodeDisposition uint64 = 0x15
	CodeDetach      uint64 = 0x16
	CodeEnd         uint64 = 0x17
	CodeClose       uint64 = 0x18
	CodeError       uint64 = 0x1d
	CodeReceived    uint64 = 0x23
	CodeAccepted    uint64 = 0x24
	CodeRejected    uint64 = 0x25
	CodeReleased    uint64 = 0x26
	CodeModified    uint64 = 0x27
	CodeSource      uint64 = 0x28
	CodeTarget      uint64 = 0x29
)

// Performative is the body of a frame: one of *Open, *Begin, *Attach, *Flow, *Transfer,
// *Disposition, *Detach, *End, *Close (AMQP frames) or *SASLMechanisms, *SASLInit,
// *SASLChallenge, *SASLResponse, *SASLOutcome (SASL frames). The interface is sealed.
type Performative interface {
	// DescriptorCode returns the numeric descriptor, for example CodeOpen.
	DescriptorCode() uint64
	composite
}

// composite is a value this package encodes as a described list: performatives, delivery
// states, Source, Target and Error. Marshal and AppendValue accept every composite.
type composite interface {
	DescriptorCode() uint64
	// appendFields appends the fields in order through w (trailing nulls are trimmed by w).
	appendFields(w *listWriter) error
	// decodeFields sets the fields from the decoded list; absent fields keep their defaults.
	decodeFields(f *fieldReader) error
}

// Open is the open performative (part 2.7.1), the first frame on a connection.
// Nil pointers mean the field is absent: MaxFrameSize then defaults to 4294967295,
// ChannelMax to 65535, IdleTimeOut to "no timeout".
type Open struct {
	ContainerID         string // mandatory
	Hostname            string // empty: absent
	MaxFrameSize        *uint32
	ChannelMax          *uint16
	IdleTimeOut         *uint32 // milliseconds
	OutgoingLocales     []Symbol
	IncomingLocales     []Symbol
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Begin is the begin performative (part 2.7.2). RemoteChannel is nil in the begin that
// starts a session and set in the answer. HandleMax nil means 4294967295.
type Begin struct {
	RemoteChannel       *uint16
	NextOutgoingID      uint32 // mandatory
	IncomingWindow      uint32 // mandatory
	OutgoingWindow      uint32 // mandatory
	HandleMax           *uint32
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Attach is the attach performative (part 2.7.3). Nil SndSettleMode means
// SenderSettleMixed and nil RcvSettleMode ReceiverSettleFirst. InitialDeliveryCount is
// always encoded for RoleSender and only when non-zero for RoleReceiver. MaxMessageSize 0
// means no limit (absent).
type Attach struct {
	Name                 string // mandatory
	Handle               uint32 // mandatory
	Role                 Role   // mandatory
	SndSettleMode        *SenderSettleMode
	RcvSettleMode        *ReceiverSettleMode
	Source               *Source
	Target               *Target
	Unsettled            Map
	IncompleteUnsettled  bool
	InitialDeliveryCount uint32
	MaxMessageSize       uint64
	OfferedCapabilities  []Symbol
	DesiredCapabilities  []Symbol
	Properties           Map
}

// Flow is the flow performative (part 2.7.4). Nil pointers are absent fields (Handle nil:
// the flow is about the session only).
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32 // mandatory
	NextOutgoingID uint32 // mandatory
	OutgoingWindow uint32 // mandatory
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     Map
}

// Transfer is the transfer performative (part 2.7.5). The message bytes travel in
// Frame.Payload, not here. DeliveryID, DeliveryTag and MessageFormat are absent on the
// continuation frames of a multi-frame delivery (nil). MessageFormat 0 is a plain message,
// MessageFormatBatch a Service Bus batch.
type Transfer struct {
	Handle        uint32 // mandatory
	DeliveryID    *uint32
	DeliveryTag   []byte // nil: absent
	MessageFormat *uint32
	Settled       bool
	More          bool
	RcvSettleMode *ReceiverSettleMode
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool
}

// Disposition is the disposition performative (part 2.7.6): the settlement or new state of
// the deliveries First..Last (Last nil: only First).
type Disposition struct {
	Role      Role   // mandatory
	First     uint32 // mandatory
	Last      *uint32
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Detach is the detach performative (part 2.7.7).
type Detach struct {
	Handle uint32 // mandatory
	Closed bool
	Error  *Error
}

// End is the end performative (part 2.7.8).
type End struct {
	Error *Error
}

// Close is the close performative (part 2.7.9).
type Close struct {
	Error *Error
}

// Error is the AMQP error type (part 2.8.14), carried by Detach, End, Close and Rejected.
type Error struct {
	Condition   Symbol // mandatory, for example "amqp:not-found"
	Description string // empty: absent
	Info        Map    // symbol keys; nil: absent
}

// Error implements the error interface: "condition: description".
func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return fmt.Sprintf("%s: %s", e.Condition, e.Description)
}

// Source is the source terminus of a link (part 3.5.3). Zero values are absent fields with
// the specification's defaults: Durable 0 (none), ExpiryPolicy "session-end", Timeout 0.
// Filter is the filter-set: symbol keys, described values.
type Source struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32 // seconds
	Dynamic               bool
	DynamicNodeProperties Map
	DistributionMode      Symbol
	Filter                Map
	DefaultOutcome        DeliveryState
	Outcomes              []Symbol
	Capabilities          []Symbol
}

// Target is the target terminus of a link (part 3.5.4); zero values as in Source.
type Target struct {
	Address               string
	Durable               uint32
	ExpiryPolicy          Symbol
	Timeout               uint32 // seconds
	Dynamic               bool
	DynamicNodeProperties Map
	Capabilities          []Symbol
}

// DeliveryState is the state or outcome of a delivery: *Received, *Accepted, *Rejected,
// *Released or *Modified. The interface is sealed.
type DeliveryState interface {
	composite
	deliveryState()
}

// Received is the received delivery state (part 3.4.1).
type Received struct {
	SectionNumber uint32 // mandatory
	SectionOffset uint64 // mandatory
}

// Accepted is the accepted outcome (part 3.4.2): Service Bus completes the message.
type Accepted struct{}

// Rejected is the rejected outcome (part 3.4.3): Service Bus dead-letters the message
// when Error.Condition is "com.microsoft:dead-letter".
type Rejected struct {
	Error *Error
}

// Released is the released outcome (part 3.4.4).
type Released struct{}

// Modified is the modified outcome (part 3.4.5): Service Bus abandons the message, or
// defers it when UndeliverableHere is true.
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations Map
}

func (*Received) deliveryState() {}
func (*Accepted) deliveryState() {}
func (*Rejected) deliveryState() {}
func (*Released) deliveryState() {}
func (*Modified) deliveryState() {}

// DescriptorCode implements Performative.
func (*Open) DescriptorCode() uint64 { return CodeOpen }

// DescriptorCode implements Performative.
func (*Begin) DescriptorCode() uint64 { return CodeBegin }

// DescriptorCode implements Performative.
func (*Attach) DescriptorCode() uint64 { return CodeAttach }

// DescriptorCode implements Performative.
func (*Flow) DescriptorCode() uint64 { return CodeFlow }

// DescriptorCode implements Performative.
func (*Transfer) DescriptorCode() uint64 { return CodeTransfer }

// DescriptorCode implements Performative.
func (*Disposition) DescriptorCode() uint64 { return CodeDisposition }

// DescriptorCode implements Performative.
func (*Detach) DescriptorCode() uint64 { return CodeDetach }

// DescriptorCode implements Performative.
func (*End) DescriptorCode() uint64 { return CodeEnd }

// DescriptorCode implements Performative.
func (*Close) DescriptorCode() uint64 { return CodeClose }

// DescriptorCode returns CodeError.
func (*Error) DescriptorCode() uint64 { return CodeError }

// DescriptorCode returns CodeSource.
func (*Source) DescriptorCode() uint64 { return CodeSource }

// DescriptorCode returns CodeTarget.
func (*Target) DescriptorCode() uint64 { return CodeTarget }

// DescriptorCode returns CodeReceived.
func (*Received) DescriptorCode() uint64 { return CodeReceived }

// DescriptorCode returns CodeAccepted.
func (*Accepted) DescriptorCode() uint64 { return CodeAccepted }

// DescriptorCode returns CodeRejected.
func (*Rejected) DescriptorCode() uint64 { return CodeRejected }

// DescriptorCode returns CodeReleased.
func (*Released) DescriptorCode() uint64 { return CodeReleased }

// DescriptorCode returns CodeModified.
func (*Modified) DescriptorCode() uint64 { return CodeModified }
