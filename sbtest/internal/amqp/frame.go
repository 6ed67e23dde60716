package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
)

// Frame types (part 2.3): an AMQP frame carries a performative, a SASL frame a SASL body.
const (
	FrameTypeAMQP uint8 = 0x00
	FrameTypeSASL uint8 = 0x01
)

// Protocol headers (part 2.2 and 5.2): each side sends one before its frames. A connection
// that authenticates starts with ProtoHeaderSASL, then ProtoHeaderAMQP after the SASL
// outcome.
const (
	ProtoHeaderAMQP = "AMQP\x00\x01\x00\x00"
	ProtoHeaderSASL = "AMQP\x03\x01\x00\x00"
)

// frameHeaderSize is the size of the fixed frame header (size, doff, type, channel).
const frameHeaderSize = 8

// Frame is one AMQP or SASL frame. Body nil is an empty frame (a heartbeat). Payload is the
// message bytes that follow a *Transfer body; it is empty for every other body.
type Frame struct {
	Type    uint8
	Channel uint16
	Body    Performative
	Payload []byte
}

// MinMaxFrameSize is the smallest max-frame-size a peer may announce (part 2.7.1): every
// peer accepts frames of this size, also before the open frames are exchanged.
const MinMaxFrameSize = 512

// ReadFrame reads one frame from r. maxFrameSize bounds the total frame size (header
// included); 0 means MinMaxFrameSize (the buffer for the body is allocated from the
// announced size, so pass the smallest bound that fits: the negotiated max-frame-size, or
// your own limit before the open frames are exchanged). A larger frame is rejected
// from its header, before its body is read, with an error wrapping ErrFrameTooLarge. A
// malformed header or body yields an error wrapping ErrMalformed. io.EOF is returned as is
// when r ends cleanly before a frame starts, io.ErrUnexpectedEOF when it ends inside one.
// The returned Frame does not alias any buffer of the caller.
func ReadFrame(r io.Reader, maxFrameSize uint32) (Frame, error) {
	var h [frameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(h[0:4])
	doff := h[4]
	f := Frame{Type: h[5], Channel: binary.BigEndian.Uint16(h[6:8])}
	if maxFrameSize == 0 {
		maxFrameSize = MinMaxFrameSize
	}
	if size > maxFrameSize {
		return Frame{}, fmt.Errorf("%w: %d bytes announced, at most %d", ErrFrameTooLarge, size, maxFrameSize)
	}
	if size < frameHeaderSize {
		return Frame{}, malformed("frame size %d smaller than its header", size)
	}
	if doff < 2 || uint32(doff)*4 > size {
		return Frame{}, malformed("frame data offset %d (size %d)", doff, size)
	}
	if f.Type != FrameTypeAMQP && f.Type != FrameTypeSASL {
		return Frame{}, malformed("frame type 0x%02x", f.Type)
	}
	if f.Type == FrameTypeSASL {
		f.Channel = 0 // the type-specific bytes of a SASL frame are ignored
	}
	buf := make([]byte, size-frameHeaderSize)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	body := buf[uint32(doff)*4-frameHeaderSize:] // the extended header is skipped
	if err := f.decodeBody(body); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// ParseFrameBody decodes a frame body (the bytes after the header and extended header) of
// the given type, as ReadFrame does. It is ReadFrame without the reader, for callers that
// frame themselves. Errors wrap ErrMalformed.
func ParseFrameBody(frameType uint8, channel uint16, body []byte) (Frame, error) {
	f := Frame{Type: frameType, Channel: channel}
	if err := f.decodeBody(body); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// decodeBody decodes the performative and, for a transfer, keeps the rest as Payload.
func (f *Frame) decodeBody(body []byte) error {
	if len(body) == 0 {
		return nil // empty frame: heartbeat
	}
	mk := newPerformative
	if f.Type == FrameTypeSASL {
		mk = newSASLBody
	}
	d := decoder{b: body}
	c, err := d.decodeComposite(0, mk)
	if err != nil {
		return err
	}
	if c == nil {
		return malformed("frame type 0x%02x with an unknown or misplaced performative", f.Type)
	}
	f.Body = c.(Performative)
	if len(d.b) > 0 {
		if _, ok := f.Body.(*Transfer); !ok {
			return malformed("%d bytes after a %s performative", len(d.b), compositeName(f.Body.DescriptorCode()))
		}
		f.Payload = d.b
	}
	return nil
}

// newPerformative returns a new AMQP performative for code, or nil.
func newPerformative(code uint64) composite {
	switch code {
	case CodeOpen:
		return new(Open)
	case CodeBegin:
		return new(Begin)
	case CodeAttach:
		return new(Attach)
	case CodeFlow:
		return new(Flow)
	case CodeTransfer:
		return new(Transfer)
	case CodeDisposition:
		return new(Disposition)
	case CodeDetach:
		return new(Detach)
	case CodeEnd:
		return new(End)
	case CodeClose:
		return new(Close)
	}
	return nil
}

// newSASLBody returns a new SASL frame body for code, or nil.
func newSASLBody(code uint64) composite {
	switch code {
	case CodeSASLMechanisms:
		return new(SASLMechanisms)
	case CodeSASLInit:
		return new(SASLInit)
	case CodeSASLChallenge:
		return new(SASLChallenge)
	case CodeSASLResponse:
		return new(SASLResponse)
	case CodeSASLOutcome:
		return new(SASLOutcome)
	}
	return nil
}

// isSASL reports whether p is a SASL frame body.
func isSASL(p Performative) bool {
	c := p.DescriptorCode()
	return c >= CodeSASLMechanisms && c <= CodeSASLOutcome
}

// AppendFrame appends the encoded frame f to dst. The doff is 2 (no extended header).
// It fails if f.Body fails to encode, if the frame type does not fit the body (SASL bodies
// go in FrameTypeSASL frames, the others in FrameTypeAMQP), if a body other than *Transfer
// has a Payload, if Body is a nil pointer, or if the frame exceeds 4 GiB. On error dst is
// returned unchanged.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	start := len(dst)
	switch {
	case f.Type != FrameTypeAMQP && f.Type != FrameTypeSASL:
		return dst, fmt.Errorf("amqp: frame type 0x%02x", f.Type)
	case f.Body == nil && len(f.Payload) > 0:
		return dst, errors.New("amqp: payload without a transfer body")
	case f.Body != nil && reflect.ValueOf(f.Body).IsNil():
		return dst, fmt.Errorf("amqp: nil %T body (use a nil Body for an empty frame)", f.Body)
	case f.Body != nil && isSASL(f.Body) != (f.Type == FrameTypeSASL):
		return dst, fmt.Errorf("amqp: %T in a frame of type 0x%02x", f.Body, f.Type)
	}
	if _, ok := f.Body.(*Transfer); !ok && len(f.Payload) > 0 {
		return dst, fmt.Errorf("amqp: payload after %T", f.Body)
	}
	dst = append(dst, 0, 0, 0, 0, 2, f.Type, byte(f.Channel>>8), byte(f.Channel))
	if f.Body != nil {
		var err error
		if dst, err = appendComposite(dst, f.Body); err != nil {
			return dst[:start], err
		}
		dst = append(dst, f.Payload...)
	}
	size := len(dst) - start
	if uint64(size) > math.MaxUint32 {
		return dst[:start], errors.New("amqp: frame larger than 4 GiB")
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(size))
	return dst, nil
}

// ReadProtoHeader reads the 8-byte protocol header from r. It returns an error wrapping
// ErrMalformed (with the bytes read) if they do not start with "AMQP"; the caller compares
// the header with ProtoHeaderAMQP or ProtoHeaderSASL. Read errors are returned as is.
func ReadProtoHeader(r io.Reader) ([8]byte, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return h, err
	}
	if string(h[:4]) != "AMQP" {
		return h, malformed("protocol header %q", h[:])
	}
	return h, nil
}
