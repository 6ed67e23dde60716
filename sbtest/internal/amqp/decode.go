package amqp

// Unmarshal decodes the first AMQP value of data and returns it with the bytes that follow
// it. Every error wraps ErrMalformed.
func Unmarshal(data []byte) (v any, rest []byte, err error) {
	panic("todo")
}

// fieldReader reads the fields of a composite's list in order.
type fieldReader struct{}
