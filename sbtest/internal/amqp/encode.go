package amqp

// Marshal returns the AMQP encoding of v (see the package documentation for the mapping).
// It returns an error wrapping ErrUnsupportedType for a Go value without an AMQP type.
func Marshal(v any) ([]byte, error) {
	return AppendValue(nil, v)
}

// AppendValue appends the AMQP encoding of v to dst and returns the extended slice.
func AppendValue(dst []byte, v any) ([]byte, error) {
	panic("todo")
}

// listWriter builds the described list of a composite, trimming trailing nulls.
type listWriter struct{}
