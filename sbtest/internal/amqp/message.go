package amqp

import (
	"fmt"
	"time"
)

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

// MarshalBinary encodes m as its sections in the specification's order: header,
// delivery-annotations, message-annotations, properties, application-properties, body,
// footer. It fails with an error wrapping ErrUnsupportedType for a value without an AMQP
// type, or if more than one body kind is set.
func (m *Message) MarshalBinary() ([]byte, error) {
	return m.AppendBinary(make([]byte, 0, m.sizeHint()))
}

// sizeHint estimates the encoded size so that MarshalBinary allocates once in the usual
// case.
func (m *Message) sizeHint() int {
	n := 256
	for _, d := range m.Data {
		n += len(d) + 8
	}
	return n
}

// AppendBinary appends the encoding of m to dst (see MarshalBinary). On error dst is
// returned unchanged.
func (m *Message) AppendBinary(dst []byte) ([]byte, error) {
	start := len(dst)
	bodies := 0
	if len(m.Data) > 0 {
		bodies++
	}
	if len(m.Sequence) > 0 {
		bodies++
	}
	if m.HasValue {
		bodies++
	}
	if bodies > 1 {
		return dst, fmt.Errorf("%w: message with more than one kind of body", ErrUnsupportedType)
	}
	var err error
	if m.Header != nil {
		if dst, err = appendComposite(dst, m.Header); err != nil {
			return dst[:start], err
		}
	}
	for _, s := range []struct {
		code uint64
		m    Map
	}{
		{CodeDeliveryAnnotations, m.DeliveryAnnotations},
		{CodeMessageAnnotations, m.MessageAnnotations},
	} {
		if s.m != nil {
			if dst, err = appendValue(appendSectionDescriptor(dst, s.code), s.m, 1); err != nil {
				return dst[:start], err
			}
		}
	}
	if m.Properties != nil {
		if dst, err = appendComposite(dst, m.Properties); err != nil {
			return dst[:start], err
		}
	}
	if m.ApplicationProperties != nil {
		if dst, err = appendValue(appendSectionDescriptor(dst, CodeApplicationProperties), m.ApplicationProperties, 1); err != nil {
			return dst[:start], err
		}
	}
	for _, d := range m.Data {
		dst = appendBinary(appendSectionDescriptor(dst, CodeData), d)
	}
	for _, seq := range m.Sequence {
		if dst, err = appendList(appendSectionDescriptor(dst, CodeAMQPSequence), seq, 1); err != nil {
			return dst[:start], err
		}
	}
	if m.HasValue {
		if dst, err = appendValue(appendSectionDescriptor(dst, CodeAMQPValue), m.Value, 1); err != nil {
			return dst[:start], err
		}
	}
	if m.Footer != nil {
		if dst, err = appendValue(appendSectionDescriptor(dst, CodeFooter), m.Footer, 1); err != nil {
			return dst[:start], err
		}
	}
	return dst, nil
}

// appendSectionDescriptor appends 0x00 0x53 code.
func appendSectionDescriptor(dst []byte, code uint64) []byte {
	return append(dst, tcDescribed, tcSmallUlong, byte(code))
}

// UnmarshalBinary decodes the sections of data into m, replacing its contents. Sections
// must come in the specification's order, each at most once (data and amqp-sequence may
// repeat); a message with no section at all is valid. Every error wraps ErrMalformed.
// Data sections alias data.
func (m *Message) UnmarshalBinary(data []byte) error {
	*m = Message{}
	d := decoder{b: data}
	last := uint64(0) // code of the previous section
	for len(d.b) > 0 {
		c, err := d.byte1()
		if err != nil {
			return err
		}
		if c != tcDescribed {
			return malformed("message section starts with constructor 0x%02x", c)
		}
		code, ok, err := d.descriptorCode(1)
		if err != nil {
			return err
		}
		if !ok || code < CodeHeader || code > CodeFooter {
			return malformed("unknown message section descriptor")
		}
		repeatable := code == CodeData || code == CodeAMQPSequence
		if code < last || (code == last && !repeatable) {
			return malformed("message section %s out of order", compositeName(code))
		}
		if code >= CodeData && code <= CodeAMQPValue && last >= CodeData && last <= CodeAMQPValue && code != last {
			return malformed("message with more than one kind of body")
		}
		last = code
		if err := m.decodeSection(&d, code); err != nil {
			return err
		}
	}
	return nil
}

// decodeSection decodes the value of the section code (its descriptor already read).
func (m *Message) decodeSection(d *decoder, code uint64) error {
	switch code {
	case CodeHeader:
		m.Header = new(Header)
		return d.compositeBody(1, m.Header)
	case CodeProperties:
		m.Properties = new(Properties)
		return d.compositeBody(1, m.Properties)
	case CodeDeliveryAnnotations, CodeMessageAnnotations, CodeApplicationProperties, CodeFooter:
		c, err := d.byte1()
		if err != nil {
			return err
		}
		if c != tcMap8 && c != tcMap32 {
			return malformed("%s section with constructor 0x%02x, want a map", compositeName(code), c)
		}
		v, err := d.mapValue(c == tcMap32, 1)
		if err != nil {
			return err
		}
		switch code {
		case CodeDeliveryAnnotations:
			m.DeliveryAnnotations = v
		case CodeMessageAnnotations:
			m.MessageAnnotations = v
		case CodeApplicationProperties:
			m.ApplicationProperties = v
		default:
			m.Footer = v
		}
	case CodeData:
		c, err := d.byte1()
		if err != nil {
			return err
		}
		if c != tcVbin8 && c != tcVbin32 {
			return malformed("data section with constructor 0x%02x, want binary", c)
		}
		b, err := d.variable(c == tcVbin32)
		if err != nil {
			return err
		}
		m.Data = append(m.Data, b)
	case CodeAMQPSequence:
		c, err := d.byte1()
		if err != nil {
			return err
		}
		var l []any
		switch c {
		case tcList0:
			l = []any{}
		case tcList8, tcList32:
			if l, err = d.list(c == tcList32, 1); err != nil {
				return err
			}
		default:
			return malformed("amqp-sequence section with constructor 0x%02x, want a list", c)
		}
		m.Sequence = append(m.Sequence, l)
	case CodeAMQPValue:
		v, err := d.value(1)
		if err != nil {
			return err
		}
		m.Value, m.HasValue = v, true
	}
	return nil
}

// compositeBody decodes the list of a composite whose descriptor was already read.
func (d *decoder) compositeBody(depth int, c composite) error {
	f, err := d.listFields(depth, c.DescriptorCode())
	if err != nil {
		return err
	}
	if err := c.decodeFields(f); err != nil {
		return err
	}
	return f.end()
}

var (
	_ composite = (*Header)(nil)
	_ composite = (*Properties)(nil)
)

// DescriptorCode returns CodeHeader.
func (*Header) DescriptorCode() uint64 { return CodeHeader }

// DescriptorCode returns CodeProperties.
func (*Properties) DescriptorCode() uint64 { return CodeProperties }

func (h *Header) appendFields(w *listWriter) error {
	w.optBool(h.Durable)
	if h.Priority == nil {
		w.null()
	} else {
		w.ubyte(*h.Priority)
	}
	w.optUint(h.TTL)
	w.optBool(h.FirstAcquirer)
	w.uint(h.DeliveryCount) // always: rhea (the JavaScript SDK) reports an absent one as undefined, not 0
	return nil
}

func (h *Header) decodeFields(f *fieldReader) error {
	h.Durable = f.boolean()
	if v, ok := f.ubyteField(); ok {
		h.Priority = &v
	}
	h.TTL = f.optUint()
	h.FirstAcquirer = f.boolean()
	h.DeliveryCount = f.uint()
	return f.err
}

func (p *Properties) appendFields(w *listWriter) error {
	if err := checkMessageID(p.MessageID); err != nil {
		return err
	}
	if err := checkMessageID(p.CorrelationID); err != nil {
		return err
	}
	w.value(p.MessageID)
	w.optBinary(p.UserID)
	w.optStrPtr(p.To)
	w.optStrPtr(p.Subject)
	w.optStrPtr(p.ReplyTo)
	w.value(p.CorrelationID)
	w.optSymbolPtr(p.ContentType)
	w.optSymbolPtr(p.ContentEncoding)
	w.optTime(p.AbsoluteExpiryTime)
	w.optTime(p.CreationTime)
	w.optStrPtr(p.GroupID)
	w.optUint(p.GroupSequence)
	w.optStrPtr(p.ReplyToGroupID)
	return w.err
}

func (p *Properties) decodeFields(f *fieldReader) error {
	p.MessageID = f.messageID()
	p.UserID = f.binary()
	p.To = f.optStrPtr()
	p.Subject = f.optStrPtr()
	p.ReplyTo = f.optStrPtr()
	p.CorrelationID = f.messageID()
	p.ContentType = f.optSymbolPtr()
	p.ContentEncoding = f.optSymbolPtr()
	p.AbsoluteExpiryTime = f.optTime()
	p.CreationTime = f.optTime()
	p.GroupID = f.optStrPtr()
	p.GroupSequence = f.optUint()
	p.ReplyToGroupID = f.optStrPtr()
	return f.err
}

// checkMessageID rejects a message-id or correlation-id of a type the specification does
// not allow (ulong, uuid, binary, string).
func checkMessageID(v any) error {
	switch v.(type) {
	case nil, uint64, UUID, []byte, string:
		return nil
	}
	return fmt.Errorf("%w: message-id of type %T (want uint64, UUID, []byte or string)", ErrUnsupportedType, v)
}

// messageID reads a message-id field: ulong, uuid, binary or string.
func (f *fieldReader) messageID() any {
	if !f.next() {
		return nil
	}
	v, _ := f.typed("message-id (ulong, uuid, binary or string)",
		tcUlong0, tcSmallUlong, tcUlong, tcUUID, tcVbin8, tcVbin32, tcStr8, tcStr32)
	return v
}
