package amqp

import "io"

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

// ReadFrame reads one frame from r. maxFrameSize bounds the total frame size (header
// included); 0 means no bound beyond the 32-bit size field. A larger frame is rejected
// from its header, before its body is read, with an error wrapping ErrFrameTooLarge. A
// malformed header or body yields an error wrapping ErrMalformed. io.EOF is returned as is
// when r ends cleanly before a frame starts, io.ErrUnexpectedEOF when it ends inside one.
// The returned Frame does not alias any buffer of the caller.
func ReadFrame(r io.Reader, maxFrameSize uint32) (Frame, error) {
	panic("todo")
}

// AppendFrame appends the encoded frame f to dst. The doff is 2 (no extended header).
// It fails if f.Body fails to encode, if the frame type does not fit the body (SASL bodies
// go in FrameTypeSASL frames, the others in FrameTypeAMQP), if a body other than *Transfer
// has a Payload, or if the frame exceeds 4 GiB.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	panic("todo")
}

// ReadProtoHeader reads the 8-byte protocol header from r. It returns an error wrapping
// ErrMalformed (with the bytes read) if they do not start with "AMQP"; the caller compares
// the header with ProtoHeaderAMQP or ProtoHeaderSASL.
func ReadProtoHeader(r io.Reader) ([8]byte, error) {
	panic("todo")
}
