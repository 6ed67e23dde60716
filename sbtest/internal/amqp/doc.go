// Package amqp is the AMQP 1.0 codec of sbtest's Service Bus emulator (sbtest.NewServer).
//
// It is internal: it implements the subset of AMQP 1.0 that the emulator needs to talk to
// the Azure Service Bus SDK, written from the OASIS AMQP 1.0 specification (part 1 types,
// part 2 transport, part 3 messaging, part 5 SASL). It contains:
//
//   - the type system (types.go, encode.go, decode.go): Marshal, AppendValue and Unmarshal
//     map AMQP values to Go values (see the table below);
//   - frames (frame.go): ReadFrame, AppendFrame and the protocol headers;
//   - performatives and their parts (performatives.go, sasl.go): Open ... Close, Source,
//     Target, Error, the delivery states and the SASL frames;
//   - messages (message.go, batch.go): the bare message sections and the batch format
//     0x80013700 that Service Bus uses for MessageBatch.
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
