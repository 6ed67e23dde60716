// Package amqp is the AMQP 1.0 codec of sbtest's Service Bus emulator (sbtest.NewServer).
//
// It is internal: it implements the subset of AMQP 1.0 that the emulator needs to talk to
// the Azure Service Bus SDK, written from the OASIS AMQP 1.0 specification (part 1 types,
// part 2 transport, part 3 messaging, part 5 SASL). It contains:
//
//   - the type system: Marshal, AppendValue (encode.go, array.go) and Unmarshal
//     (decode.go) map AMQP values to Go values (see the table below);
//   - frames (frame.go): ReadFrame, AppendFrame, ParseFrameBody and the protocol headers;
//   - performatives and their parts (performatives.go, fields.go, sasl.go): Open ... Close,
//     Source, Target, Error, the delivery states and the SASL frame bodies, encoded and
//     decoded as described lists (composite.go) without reflection;
//   - messages (message.go, batch.go): the message sections and the batch format
//     0x80013700 that Service Bus uses for MessageBatch (SplitBatch, MakeBatch).
//
// Encoding omits trailing absent fields of a performative and picks the smallest
// constructor; decoding of a performative checks each field's AMQP type, fills absent
// fields with the specification's defaults, rejects missing mandatory fields and accepts
// numeric or symbolic descriptors. Facts about what the Service Bus SDK sends (go-amqp
// v1.7.0) are pinned by the cross-check tests: it writes every composite as a list32,
// string annotation keys as symbols, error info keys as strings, timestamps as
// milliseconds, and batches as one data section per encoded message.
//
// Type mapping (encoding picks the smallest constructor; decoding accepts every constructor
// the specification defines):
//
//	null       nil           boolean    bool          ubyte   uint8     ushort  uint16
//	uint       uint32        ulong      uint64        byte    int8      short   int16
//	int        int32         long       int64         float   float32   double  float64
//	decimal32  Decimal32     decimal64  Decimal64     decimal128 Decimal128
//	char       Char          timestamp  time.Time (milliseconds since the Unix epoch, UTC)
//	uuid       UUID          binary     []byte        string  string    symbol  Symbol
//	list       []any         map        Map           array   Array
//	described  *Described
//
// Go's int and uint have no AMQP type and are rejected by the encoder (use an explicit
// width). Performatives, delivery states, Source, Target and Error encode as described
// lists; the generic decoder returns them as *Described.
//
// Decoding is hardened against hostile input: it never panics, never allocates more than a
// small multiple of the input's length, limits the nesting of compound values to
// MaxDepth levels, and every error it returns wraps ErrMalformed (frames that exceed the
// negotiated size wrap ErrFrameTooLarge instead).
//
// Nothing in the package holds state: every function is safe for concurrent use, values
// are not (as usual).
package amqp
