package amqp

// MessageFormatBatch is the transfer message-format of a Service Bus batch (the SDK's
// MessageBatch): the delivery is one Message whose data sections each hold one complete
// encoded Message.
const MessageFormatBatch uint32 = 0x80013700

// SplitBatch decodes the messages of a batch: every data section of m is decoded as one
// Message, in order. It returns an error wrapping ErrMalformed if m has no data sections or
// a section is not a valid message. The returned messages alias m's data sections.
func SplitBatch(m *Message) ([]*Message, error) {
	if len(m.Data) == 0 {
		return nil, malformed("batch without data sections")
	}
	out := make([]*Message, len(m.Data))
	for i, d := range m.Data {
		out[i] = new(Message)
		if err := out[i].UnmarshalBinary(d); err != nil {
			return nil, malformedBatch(i, err)
		}
	}
	return out, nil
}

// MakeBatch encodes msgs as the data sections of one batch message (the inverse of
// SplitBatch), to be sent with MessageFormatBatch. Errors are those of MarshalBinary.
func MakeBatch(msgs []*Message) (*Message, error) {
	b := &Message{Data: make([][]byte, len(msgs))}
	for i, m := range msgs {
		d, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		b.Data[i] = d
	}
	return b, nil
}
