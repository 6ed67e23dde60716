package amqp

import "time"

// Descriptor codes of the message sections (AMQP 1.0 part 3.2).
const (
	CodeHeader                uint64 = 0x70
	CodeDeliveryAnnotations   uint64 = 0x71
	CodeMessageAnnotations    uint64 = 0x72
	CodeProperties            uint64 = 0x73
	CodeApplicationProperties uint64 = 0x74
	CodeData                  uint64 = 0x75
	CodeAMQPSequence          uint64 = 0x76
	CodeAMQPValue             uint64 = 0x77
	CodeFooter                uint64 = 0x78
)

// Message is an AMQP 1.0 message: the sections of part 3.2, each optional. Nil fields are
// absent sections. The body is either Data (one data section per element), or Sequence
// (one amqp-sequence section per element), or Value with HasValue set (one amqp-value
// section; HasValue distinguishes an amqp-value of null from no body); setting more than
// one body kind is an error when encoding, and decoding rejects such input.
//
// Section maps: DeliveryAnnotations, MessageAnnotations and Footer have symbol (or ulong)
// keys; ApplicationProperties has string keys and simple values (Service Bus's
// ApplicationProperties). The codec does not enforce the key types.
type Message struct {
	Header                *Header
	DeliveryAnnotations   Map
	MessageAnnotations    Map
	Properties            *Properties
	ApplicationProperties Map
	Data                  [][]byte
	Sequence              [][]any
	Value                 any
	HasValue              bool
	Footer                Map
}

// Header is the header section (part 3.2.1). Nil Priority means the default 4; nil TTL
// means no time to live.
type Header struct {
	Durable       bool
	Priority      *uint8
	TTL           *uint32 // milliseconds
	FirstAcquirer bool
	DeliveryCount uint32
}

// Properties is the properties section (part 3.2.4). Nil or zero fields are absent.
// MessageID and CorrelationID hold a uint64, UUID, []byte or string (the message-id
// types); the encoder rejects other types.
type Properties struct {
	MessageID          any
	UserID             []byte
	To                 *string
	Subject            *string
	ReplyTo            *string
	CorrelationID      any
	ContentType        *Symbol
	ContentEncoding    *Symbol
	AbsoluteExpiryTime *time.Time
	CreationTime       *time.Time
	GroupID            *string
	GroupSequence      *uint32
	ReplyToGroupID     *string
}
