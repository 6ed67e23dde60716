package amqp

// MessageFormatBatch is the transfer message-format of a Service Bus batch (the SDK's
// MessageBatch): the delivery is one Message whose data sections each hold one complete
// encoded Message.
const MessageFormatBatch uint32 = 0x80013700

// SplitBatch decodes the messages of a batch: every data section of m is decoded as one
// Message, in order. It returns an error wrapping ErrMalformed if m has no data sections or
// a section is not a valid message.
func SplitBatch(m *Message) ([]*Message, error) {
	panic("todo")
}
