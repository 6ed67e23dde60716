package serialize

import (
	"fmt"
	"math"
	"strings"
	"sync"
)

// DefaultMaxBodySize is the largest body decoded when [Options.MaxBodySize] is zero: 1 MiB,
// the largest message the Premium tier accepts by default (Standard allows 256 KiB).
const DefaultMaxBodySize = 1 << 20

// DefaultContentType is the content type Encode uses when given none and
// [Options.DefaultContentType] is empty.
const DefaultContentType = "application/json"

// DefaultFallbacks are the fallback media types used when [Options.Fallbacks] is nil. New
// copies them; changing this variable affects only registries made afterwards.
var DefaultFallbacks = []string{"application/json"}

// Options configure a Registry. The zero value (or nil) gives the defaults.
type Options struct {
	// Fallbacks are media types tried in order when a message's content type is missing,
	// unknown, or its codec fails. Each must name a registered codec (for New: a built-in
	// one; register your own codecs first and then call SetFallbacks). Nil means
	// [DefaultFallbacks] (JSON); an empty, non-nil slice means no fallbacks.
	Fallbacks []string
	// MaxBodySize is the largest body, in bytes, that is decoded or encoded. Zero means
	// [DefaultMaxBodySize] (1 MiB); negative means no limit but the broker's own
	// maximum message size (256 KiB on the Standard tier; on Premium 1 MiB by default,
	// up to 100 MiB: "Service Bus quotas").
	MaxBodySize int
	// DefaultContentType is used by Encode when its content type is empty. Default
	// [DefaultContentType] ("application/json").
	DefaultContentType string
	// MessageTypeProperty, when set, is the name of an application property that Encode
	// fills with the value's type name (see [TypeName] and [EncodeOptions.MessageType]), for example
	// "MessageType". Default empty: no property is written.
	MessageTypeProperty string
	// DisableBuiltins starts the registry empty instead of with the built-in codecs.
	// Default: false (JSON, XML, protobuf, text and raw registered).
	DisableBuiltins bool
}

// Registry maps media types to codecs and holds the decoding policy (fallbacks, body size
// limit). Make one with New. The zero value is an empty registry without fallbacks, with
// the default limits. A Registry is safe for concurrent use, including registering while
// decoding.
type Registry struct {
	mu          sync.RWMutex
	exact       map[string]Codec // "type/subtype" -> codec
	suffix      map[string]Codec // "json" -> codec
	fallbacks   []MediaType
	maxBody     int
	defaultType string
	typeProp    string
}

// New returns a registry with the built-in codecs (unless [Options.DisableBuiltins]) and
// the given options; nil opts means defaults. It returns an error wrapping
// [ErrInvalidOptions] for an unparsable [DefaultContentType] or a fallback that names no
// registered codec.
func New(opts *Options) (*Registry, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &Registry{maxBody: o.MaxBodySize, typeProp: o.MessageTypeProperty, defaultType: DefaultContentType}
	if o.DefaultContentType != "" {
		if _, err := ParseMediaType(o.DefaultContentType); err != nil {
			return nil, fmt.Errorf("%w: DefaultContentType: %w", ErrInvalidOptions, err)
		}
		r.defaultType = o.DefaultContentType
	}
	if !o.DisableBuiltins {
		registerBuiltins(r)
	}
	fallbacks := o.Fallbacks
	if fallbacks == nil && !o.DisableBuiltins {
		fallbacks = DefaultFallbacks
	}
	if err := r.SetFallbacks(fallbacks...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	return r, nil
}

func registerBuiltins(r *Registry) {
	builtins := []struct {
		codec    Codec
		types    []string
		suffixes []string
	}{
		{JSONCodec{}, []string{"application/json", "text/json"}, []string{"json"}},
		{XMLCodec{}, []string{"application/xml", "text/xml"}, []string{"xml"}},
		{ProtobufCodec{}, []string{"application/x-protobuf", "application/protobuf", "application/vnd.google.protobuf"}, []string{"protobuf"}},
		{TextCodec{}, []string{"text/plain"}, nil},
		{RawCodec{}, []string{"application/octet-stream"}, nil},
	}
	for _, b := range builtins {
		for _, t := range b.types {
			_ = r.Register(t, b.codec) // cannot fail: valid types, non-nil codec
		}
		for _, s := range b.suffixes {
			_ = r.RegisterSuffix(s, b.codec)
		}
	}
}

// Register makes c the codec for mediaType ("application/msgpack"), replacing any codec
// registered for it. Case and parameters of mediaType are ignored. It fails on a nil
// registry or codec or an unparsable media type.
func (r *Registry) Register(mediaType string, c Codec) error {
	if r == nil {
		return ErrNilRegistry
	}
	if c == nil {
		return ErrNilCodec
	}
	mt, err := ParseMediaType(mediaType)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exact == nil {
		r.exact = make(map[string]Codec)
	}
	r.exact[mt.Type] = c
	return nil
}

// RegisterSuffix makes c the codec for every media type with the structured syntax suffix
// suffix ("json" or "+json") that has no exact registration. It fails on a nil registry or
// codec or an empty suffix.
func (r *Registry) RegisterSuffix(suffix string, c Codec) error {
	if r == nil {
		return ErrNilRegistry
	}
	if c == nil {
		return ErrNilCodec
	}
	s := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(suffix), "+"))
	if s == "" || strings.ContainsAny(s, "/+; ") {
		return fmt.Errorf("serialize: invalid suffix %q", suffix)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.suffix == nil {
		r.suffix = make(map[string]Codec)
	}
	r.suffix[s] = c
	return nil
}

// SetFallbacks replaces the fallback chain: media types tried in order after the message's
// own content type. Each must name a registered codec; parameters are kept (a fallback
// "text/plain; charset=iso-8859-1" reads latin-1). No arguments clears the chain.
func (r *Registry) SetFallbacks(mediaTypes ...string) error {
	if r == nil {
		return ErrNilRegistry
	}
	parsed := make([]MediaType, 0, len(mediaTypes))
	for _, s := range mediaTypes {
		mt, err := ParseMediaType(s)
		if err != nil {
			return fmt.Errorf("serialize: fallback: %w", err)
		}
		if _, err := r.codecFor(mt); err != nil {
			return fmt.Errorf("serialize: fallback: %w", err)
		}
		parsed = append(parsed, mt)
	}
	r.mu.Lock()
	r.fallbacks = parsed
	r.mu.Unlock()
	return nil
}

// Fallbacks returns the fallback chain in canonical form.
func (r *Registry) Fallbacks() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, len(r.fallbacks))
	for i, mt := range r.fallbacks {
		out[i] = mt.String()
	}
	return out
}

// Lookup returns the codec that reads contentType and the parsed media type. An exact
// registration wins over a suffix one. Errors wrap [ErrNoContentType],
// [ErrInvalidContentType] or [ErrUnknownContentType].
func (r *Registry) Lookup(contentType string) (Codec, MediaType, error) {
	if r == nil {
		return nil, MediaType{}, ErrNilRegistry
	}
	mt, err := ParseMediaType(contentType)
	if err != nil {
		return nil, MediaType{}, err
	}
	c, err := r.codecFor(mt)
	return c, mt, err
}

func (r *Registry) codecFor(mt MediaType) (Codec, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if c, ok := r.exact[mt.Type]; ok {
		return c, nil
	}
	if mt.Suffix != "" {
		if c, ok := r.suffix[mt.Suffix]; ok {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownContentType, mt.Type)
}

// MaxBodySize returns the body size limit in bytes: [math.MaxInt] for no limit.
func (r *Registry) MaxBodySize() int {
	if r == nil {
		return DefaultMaxBodySize
	}
	return bodyLimit(r.maxBody)
}

// bodyLimit resolves a body size limit: zero means DefaultMaxBodySize, negative no limit.
func bodyLimit(limit int) int {
	switch {
	case limit == 0:
		return DefaultMaxBodySize
	case limit < 0:
		return math.MaxInt
	}
	return limit
}

func (r *Registry) fallbackList() []MediaType {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.fallbacks
}

func tooLarge(n, limit int) error {
	return fmt.Errorf("%w: %d bytes, limit %d", ErrBodyTooLarge, n, limit)
}
