package amqp

import (
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error the decoders return for input that is not valid
// AMQP 1.0 (bad constructor, truncated value, wrong field type, missing mandatory field,
// nesting deeper than MaxDepth, ...). Test with [errors.Is].
var ErrMalformed = errors.New("amqp: malformed input")

// ErrFrameTooLarge is wrapped by ReadFrame's error when a frame header announces a size
// above the maximum frame size; the body is not read.
var ErrFrameTooLarge = errors.New("amqp: frame too large")

// ErrUnsupportedType is wrapped by the encoder's error for a Go value that has no AMQP
// mapping (for example int, uint, or a struct that is not one of this package's types).
var ErrUnsupportedType = errors.New("amqp: unsupported Go type")

// malformed returns an error wrapping ErrMalformed with a formatted explanation.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// malformedBatch wraps the error of the i-th message of a batch.
func malformedBatch(i int, err error) error {
	return fmt.Errorf("batch message %d: %w", i, err)
}
