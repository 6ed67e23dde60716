package amqp

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestFrameKnownBytes checks the exact encoding of frames: size, doff 2, type, channel.
func TestFrameKnownBytes(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
		want string
	}{
		{"heartbeat", Frame{Type: FrameTypeAMQP}, "00 00 00 08 02 00 00 00"},
		{"heartbeat channel", Frame{Type: FrameTypeAMQP, Channel: 0x0102}, "00 00 00 08 02 00 01 02"},
		{"close", Frame{Type: FrameTypeAMQP, Channel: 3, Body: &Close{}}, "00 00 00 0c 02 00 00 03 00 53 18 45"},
		{"sasl outcome", Frame{Type: FrameTypeSASL, Body: &SASLOutcome{Code: SASLCodeOK}},
			"00 00 00 10 02 01 00 00 00 53 44 c0 03 01 50 00"},
		{"sasl mechanisms", Frame{Type: FrameTypeSASL, Body: &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS"}}},
			"00 00 00 1c 02 01 00 00 00 53 40 c0 0f 01 e0 0c 01 a3 09 41 4e 4f 4e 59 4d 4f 55 53"},
		{"transfer with payload", Frame{Type: FrameTypeAMQP, Channel: 1, Body: &Transfer{Handle: 0, DeliveryID: Ptr(uint32(1)),
			DeliveryTag: []byte{0xaa}, MessageFormat: Ptr(uint32(0))}, Payload: []byte{0x00, 0x53, 0x75, 0xa0, 0x00}},
			"00 00 00 1a 02 00 00 01 00 53 14 c0 08 04 43 52 01 a0 01 aa 43 00 53 75 a0 00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := hx(t, tt.want)
			got, err := AppendFrame(nil, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("AppendFrame\n got % x\nwant % x", got, want)
			}
			back, err := ReadFrame(bytes.NewReader(got), 0)
			if err != nil {
				t.Fatalf("ReadFrame: %v", err)
			}
			again, err := AppendFrame(nil, back)
			if err != nil || !bytes.Equal(again, want) {
				t.Fatalf("re-encoded % x, %v", again, err)
			}
		})
	}
}

// TestReadFrameHeader covers the header rules: extended header skipped, oversize rejected
// before the body is read, bad sizes and offsets rejected, EOF handling.
func TestReadFrameHeader(t *testing.T) {
	closeBody := "00 53 18 45"
	tests := []struct {
		name    string
		in      string
		max     uint32
		wantErr error
		check   func(t *testing.T, f Frame)
	}{
		{name: "extended header skipped", in: "00 00 00 10 03 00 00 07 ee ee ee ee" + closeBody, max: 512,
			check: func(t *testing.T, f Frame) {
				if _, ok := f.Body.(*Close); !ok || f.Channel != 7 {
					t.Fatalf("got %+v", f)
				}
			}},
		{name: "empty frame with extended header is a heartbeat", in: "00 00 00 0c 03 00 00 00 ee ee ee ee", max: 512,
			check: func(t *testing.T, f Frame) {
				if f.Body != nil || f.Payload != nil {
					t.Fatalf("got %+v", f)
				}
			}},
		{name: "sasl channel bytes ignored", in: "00 00 00 10 02 01 ff ff 00 53 44 c0 03 01 50 00", max: 512,
			check: func(t *testing.T, f Frame) {
				if o, ok := f.Body.(*SASLOutcome); !ok || o.Code != 0 || f.Channel != 0 || f.Type != FrameTypeSASL {
					t.Fatalf("got %+v", f)
				}
			}},
		{name: "oversize", in: "00 00 02 01 02 00 00 00", max: 512, wantErr: ErrFrameTooLarge},
		{name: "oversize default max", in: "00 00 02 01 02 00 00 00", max: 0, wantErr: ErrFrameTooLarge},
		{name: "oversize 4 GiB", in: "ff ff ff ff 02 00 00 00", max: 1 << 20, wantErr: ErrFrameTooLarge},
		{name: "size below header", in: "00 00 00 07 02 00 00 00", max: 512, wantErr: ErrMalformed},
		{name: "doff below 2", in: "00 00 00 08 01 00 00 00", max: 512, wantErr: ErrMalformed},
		{name: "doff beyond size", in: "00 00 00 08 03 00 00 00", max: 512, wantErr: ErrMalformed},
		{name: "unknown frame type", in: "00 00 00 08 02 02 00 00", max: 512, wantErr: ErrMalformed},
		{name: "sasl body in amqp frame", in: "00 00 00 10 02 00 00 00 00 53 44 c0 03 01 50 00", max: 512, wantErr: ErrMalformed},
		{name: "amqp body in sasl frame", in: "00 00 00 0c 02 01 00 00" + closeBody, max: 512, wantErr: ErrMalformed},
		{name: "unknown performative", in: "00 00 00 0c 02 00 00 00 00 53 30 45", max: 512, wantErr: ErrMalformed},
		{name: "body not described", in: "00 00 00 09 02 00 00 00 45", max: 512, wantErr: ErrMalformed},
		{name: "bytes after close", in: "00 00 00 0d 02 00 00 00" + closeBody + "40", max: 512, wantErr: ErrMalformed},
		{name: "eof before frame", in: "", max: 512, wantErr: io.EOF},
		{name: "eof in header", in: "00 00 00", max: 512, wantErr: io.ErrUnexpectedEOF},
		{name: "eof in body", in: "00 00 00 0c 02 00 00 00 00 53", max: 512, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ReadFrame(bytes.NewReader(hx(t, tt.in)), tt.max)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadFrame error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReadFrameOversizeNotRead checks that an oversize frame is rejected from its header:
// no byte of the body is consumed.
func TestReadFrameOversizeNotRead(t *testing.T) {
	frame, err := AppendFrame(nil, Frame{Type: FrameTypeAMQP, Body: &Transfer{}, Payload: make([]byte, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	r := &countingReader{r: bytes.NewReader(frame)}
	if _, err := ReadFrame(r, 512); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if r.n != frameHeaderSize {
		t.Fatalf("read %d bytes, want only the %d-byte header", r.n, frameHeaderSize)
	}
}

func TestReadFrameSequence(t *testing.T) {
	var buf []byte
	frames := []Frame{
		{Type: FrameTypeAMQP, Channel: 0, Body: &Begin{NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000}},
		{Type: FrameTypeAMQP},
		{Type: FrameTypeAMQP, Channel: 2, Body: &Transfer{Handle: 1, More: true}, Payload: []byte("part1")},
		{Type: FrameTypeAMQP, Channel: 2, Body: &Transfer{Handle: 1}, Payload: []byte("part2")},
	}
	for _, f := range frames {
		var err error
		if buf, err = AppendFrame(buf, f); err != nil {
			t.Fatal(err)
		}
	}
	r := bytes.NewReader(buf)
	for i, want := range frames {
		got, err := ReadFrame(r, 4096)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Channel != want.Channel || !bytes.Equal(got.Payload, want.Payload) || (got.Body == nil) != (want.Body == nil) {
			t.Fatalf("frame %d: got %+v want %+v", i, got, want)
		}
	}
	if _, err := ReadFrame(r, 4096); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestAppendFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
	}{
		{"bad type", Frame{Type: 7}},
		{"payload without body", Frame{Payload: []byte{1}}},
		{"payload after open", Frame{Body: &Open{}, Payload: []byte{1}}},
		{"sasl body in amqp frame", Frame{Body: &SASLInit{}}},
		{"amqp body in sasl frame", Frame{Type: FrameTypeSASL, Body: &Open{}}},
		{"unencodable field", Frame{Body: &Open{Properties: Map{{Symbol("k"), 1}}}}},
		{"nil pointer body", Frame{Body: (*Close)(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendFrame([]byte{9}, tt.f)
			if err == nil {
				t.Fatalf("AppendFrame succeeded: % x", got)
			}
			if !bytes.Equal(got, []byte{9}) {
				t.Fatalf("dst changed: % x", got)
			}
		})
	}
}

func TestReadProtoHeader(t *testing.T) {
	tests := []struct {
		in      string
		wantErr error
	}{
		{ProtoHeaderAMQP, nil},
		{ProtoHeaderSASL, nil},
		{"AMQP\x02\x01\x00\x00", nil}, // TLS: the caller decides
		{"HTTP/1.1", ErrMalformed},
		{"AMQ", io.ErrUnexpectedEOF},
		{"", io.EOF},
	}
	for _, tt := range tests {
		h, err := ReadProtoHeader(bytes.NewReader([]byte(tt.in)))
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("ReadProtoHeader(%q) error = %v, want %v", tt.in, err, tt.wantErr)
		}
		if err == nil && string(h[:]) != tt.in {
			t.Errorf("ReadProtoHeader(%q) = %q", tt.in, h)
		}
	}
}
