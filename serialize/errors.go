package serialize

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

var (
	// ErrNilRegistry is returned when a nil *Registry is used.
	ErrNilRegistry = errors.New("serialize: nil registry")
	// ErrNilValue is returned when the value to encode, or the decode target, is nil.
	ErrNilValue = errors.New("serialize: nil value")
	// ErrInvalidTarget is returned when a decode target is not a non-nil pointer.
	ErrInvalidTarget = errors.New("serialize: decode target must be a non-nil pointer")
	// ErrNilCodec is returned by Register and RegisterSuffix for a nil codec.
	ErrNilCodec = errors.New("serialize: nil codec")
	// ErrInvalidOptions is wrapped by the errors of [New], [Handler] and [Middleware]
	// for bad options.
	ErrInvalidOptions = errors.New("serialize: invalid options")
	// ErrNoContentType is the error of the first attempt when a message has no
	// ContentType.
	ErrNoContentType = errors.New("serialize: no content type")
	// ErrInvalidContentType is returned (wrapped) for a content type that cannot be parsed
	// as an RFC 2045 media type.
	ErrInvalidContentType = errors.New("serialize: invalid content type")
	// ErrUnknownContentType is returned (wrapped) for a content type that no registered
	// codec reads.
	ErrUnknownContentType = errors.New("serialize: no codec for content type")
	// ErrUnsupportedCharset is returned (wrapped) by the text-based codecs for a charset
	// parameter other than utf-8, us-ascii and iso-8859-1.
	ErrUnsupportedCharset = errors.New("serialize: unsupported charset")
	// ErrUnsupportedType is returned (wrapped) by a codec that cannot encode or decode
	// values of the given Go type.
	ErrUnsupportedType = errors.New("serialize: unsupported type for codec")
	// ErrUnsupportedBody is returned (wrapped) when a message's AMQP body holds something
	// that cannot be read as bytes (see [MessageBody]).
	ErrUnsupportedBody = errors.New("serialize: unsupported AMQP body")
	// ErrBodyTooLarge is returned (wrapped) when a body exceeds the registry's
	// MaxBodySize; no decoder runs.
	ErrBodyTooLarge = errors.New("serialize: body too large")
	// ErrCodecPanic is the error (wrapped) of an attempt whose codec panicked.
	ErrCodecPanic = errors.New("serialize: codec panicked")
)

// Attempt is one decoder tried by [Registry.Decode].
type Attempt struct {
	// MediaType is the media type that was looked up, in canonical form
	// ("application/json; charset=utf-8"), or the raw content type when it could not be
	// parsed; empty when the message had no content type.
	MediaType string
	// Codec is the name of the codec that ran, or empty when no codec was found.
	Codec string
	// Fallback is false for the message's own content type and true for a configured
	// fallback.
	Fallback bool
	// Err is why the attempt failed; never nil.
	Err error
}

// String describes the attempt for logs and dead-letter descriptions, for example
// `fallback "application/xml" (xml): EOF` or `content-type: serialize: no content type`.
func (a Attempt) String() string {
	var b strings.Builder
	if a.Fallback {
		b.WriteString("fallback")
	} else {
		b.WriteString("content-type")
	}
	if a.MediaType != "" {
		fmt.Fprintf(&b, " %q", a.MediaType)
	}
	if a.Codec != "" {
		fmt.Fprintf(&b, " (%s)", a.Codec)
	}
	b.WriteString(": ")
	if a.Err != nil {
		b.WriteString(a.Err.Error())
	} else {
		b.WriteString("failed")
	}
	return b.String()
}

// DecodeError is returned by [Registry.Decode] when every decoder failed. It lists each
// attempt in the order tried; [errors.Is] and [errors.As] see each attempt's error.
type DecodeError struct {
	// ContentType is the message's content type as it was sent; empty when missing, or
	// "application/json" when the body was converted from an AMQP value (see [MessageBody]).
	ContentType string
	// Attempts are the decoders tried, the message's content type first.
	Attempts []Attempt
}

// Error returns "serialize: cannot decode body: " followed by the untruncated
// description of every attempt.
func (e *DecodeError) Error() string {
	return "serialize: cannot decode body: " + e.describe()
}

// Unwrap returns the error of every attempt.
func (e *DecodeError) Unwrap() []error {
	errs := make([]error, 0, len(e.Attempts))
	for _, a := range e.Attempts {
		if a.Err != nil {
			errs = append(errs, a.Err)
		}
	}
	return errs
}

// Description returns a one-line account of every attempt, suitable as a dead-letter
// error description, truncated to at most maxLen bytes (on a UTF-8 boundary, ending in
// "..." when cut). Zero means [DefaultMaxDescriptionLength]; negative means no limit.
func (e *DecodeError) Description(maxLen int) string {
	if maxLen == 0 {
		maxLen = DefaultMaxDescriptionLength
	}
	return truncate(e.describe(), maxLen)
}

func (e *DecodeError) describe() string {
	if len(e.Attempts) == 0 {
		return "no decoder was tried"
	}
	parts := make([]string, len(e.Attempts))
	for i, a := range e.Attempts {
		parts[i] = a.String()
	}
	return fmt.Sprintf("%d attempt(s) failed: %s", len(e.Attempts), strings.Join(parts, "; "))
}

// truncate shortens s to at most maxLen bytes without splitting a UTF-8 sequence. A cut
// string ends in "..." (counted in maxLen). A negative maxLen returns s unchanged.
func truncate(s string, maxLen int) string {
	if maxLen < 0 || len(s) <= maxLen {
		return s
	}
	const ellipsis = "..."
	if maxLen <= len(ellipsis) {
		return ellipsis[:maxLen]
	}
	cut := maxLen - len(ellipsis)
	for i := 0; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	return s[:cut] + ellipsis
}
