// Package serialize turns Service Bus message bodies into Go values and back, chosen by
// the message's ContentType (RFC 2045), with a chain of fallback decoders and
// dead-lettering when every decoder fails.
//
// The body of a Service Bus message is an opaque block of bytes; the ContentType property
// says how to read it (for example "application/json; charset=utf-8"). A Registry maps
// media types to Codecs. Lookup is case-insensitive, keeps the parameters (a charset is
// honoured by the text-based codecs) and understands structured syntax suffixes:
// "application/vnd.acme.order+json" is read by the JSON codec and "application/atom+xml"
// by the XML codec.
//
// Built-in codecs (registered by [New] unless [Options.DisableBuiltins] is set):
//
//   - JSON: application/json, text/json, any "+json" type. Protocol buffer messages are
//     written and read with protojson, other values with encoding/json.
//   - XML: application/xml, text/xml, any "+xml" type (encoding/xml).
//   - Protocol buffers: application/x-protobuf, application/protobuf,
//     application/vnd.google.protobuf, any "+protobuf" type (binary wire format).
//   - Plain text: text/plain into *string, *[]byte or an [encoding.TextUnmarshaler]. The
//     charset parameter may be utf-8 (the default), us-ascii or iso-8859-1 (latin-1,
//     converted to UTF-8); any other charset fails with [ErrUnsupportedCharset].
//   - Raw bytes: application/octet-stream into *[]byte or an [encoding.BinaryUnmarshaler].
//
// Adding another format (MessagePack, CBOR, Avro) is a type with three methods and one
// Register call; see the [Registry.Register] example.
//
// # Decoding and fallbacks
//
// [Registry.Decode] (and the generic [Decode]) tries the codec of the message's ContentType
// first. When the ContentType is missing, cannot be parsed, names no registered codec, or
// its codec fails, the registry's fallbacks are tried in order (by default only
// "application/json"; see [Options.Fallbacks]). The value is reset to its zero value before
// each further attempt. When every attempt fails the error is a [*DecodeError] that lists
// each attempt with its media type, codec name and error.
//
// Bodies larger than [Options.MaxBodySize] (default [DefaultMaxBodySize], 1 MiB) are refused
// before any decoder runs, with an error wrapping [ErrBodyTooLarge].
//
// Codecs never bring the process down: a panic inside a codec is recovered and becomes a
// failed attempt whose error wraps [ErrCodecPanic] (the built-in codecs are fuzz-tested so
// that this is only a last resort).
//
// Messages sent by older .NET clients may carry their payload as an AMQP value section
// instead of a data section; the SDK then leaves [azservicebus.ReceivedMessage].Body empty and exposes
// the value as RawAMQPMessage.Body.Value. Decode reads the body from there (and from
// several data sections or sequence sections) as described on [MessageBody].
//
// # Handlers
//
// [Handler] adapts a typed function to an [sbkit.Handler] for the processor of package
// receiver: the message is decoded before the function runs, and a message that cannot be
// decoded is dead-lettered at once ([sbkit.DeadLetter]) with the reason
// [DefaultDeadLetterReason] ("DeserializationFailed") and a description naming every
// attempt, truncated to [DefaultMaxDescriptionLength] (1024) bytes. Abandoning instead
// would only redeliver the same undecodable bytes until the broker's MaxDeliveryCount is
// exhausted. A body over the size limit is dead-lettered with [DefaultBodyTooLargeReason]
// ("BodyTooLarge"). Both reasons are configurable ([HandlerOptions]), and a
// [DecodeErrorHook] lets the application see every such error. A nil registry or
// function fails when the handler is made, not per message.
//
// # Encoding
//
// [Registry.Encode] builds an [*azservicebus.Message] from a value and a content type, setting
// Body, ContentType and, when [Options.MessageTypeProperty] is set, an application property
// naming the value's type.
//
// Registries are safe for concurrent use; codecs registered in them must be too.
package serialize
