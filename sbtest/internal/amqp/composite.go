package amqp

import (
	"fmt"
	"reflect"
	"time"
)

// descriptorNames maps the symbolic descriptors of the composites this package knows to
// their numeric codes; peers may use either form.
var descriptorNames = map[Symbol]uint64{
	"amqp:open:list":                  CodeOpen,
	"amqp:begin:list":                 CodeBegin,
	"amqp:attach:list":                CodeAttach,
	"amqp:flow:list":                  CodeFlow,
	"amqp:transfer:list":              CodeTransfer,
	"amqp:disposition:list":           CodeDisposition,
	"amqp:detach:list":                CodeDetach,
	"amqp:end:list":                   CodeEnd,
	"amqp:close:list":                 CodeClose,
	"amqp:error:list":                 CodeError,
	"amqp:received:list":              CodeReceived,
	"amqp:accepted:list":              CodeAccepted,
	"amqp:rejected:list":              CodeRejected,
	"amqp:released:list":              CodeReleased,
	"amqp:modified:list":              CodeModified,
	"amqp:source:list":                CodeSource,
	"amqp:target:list":                CodeTarget,
	"amqp:sasl-mechanisms:list":       CodeSASLMechanisms,
	"amqp:sasl-init:list":             CodeSASLInit,
	"amqp:sasl-challenge:list":        CodeSASLChallenge,
	"amqp:sasl-response:list":         CodeSASLResponse,
	"amqp:sasl-outcome:list":          CodeSASLOutcome,
	"amqp:header:list":                CodeHeader,
	"amqp:delivery-annotations:map":   CodeDeliveryAnnotations,
	"amqp:message-annotations:map":    CodeMessageAnnotations,
	"amqp:properties:list":            CodeProperties,
	"amqp:application-properties:map": CodeApplicationProperties,
	"amqp:data:binary":                CodeData,
	"amqp:amqp-sequence:list":         CodeAMQPSequence,
	"amqp:amqp-value:*":               CodeAMQPValue,
	"amqp:footer:map":                 CodeFooter,
}

// appendComposite appends c as a described list with a smallulong descriptor; a nil
// pointer appends null.
func appendComposite(dst []byte, c composite) ([]byte, error) {
	if rv := reflect.ValueOf(c); rv.Kind() == reflect.Pointer && rv.IsNil() {
		return append(dst, tcNull), nil
	}
	w := listWriter{}
	w.begin(dst, c.DescriptorCode())
	if err := c.appendFields(&w); err != nil {
		return dst, err
	}
	out, err := w.finish()
	if err != nil {
		return dst, err
	}
	return out, nil
}

// listWriter builds the described list of a composite. Fields are appended in order;
// trailing nulls are dropped by finish, as the specification allows.
type listWriter struct {
	dst       []byte
	c         compound
	count     int // fields appended
	keepLen   int // len(dst) after the last non-null field
	keepCount int // count at that point
	err       error
}

func (w *listWriter) begin(dst []byte, code uint64) {
	dst = appendUlong(append(dst, tcDescribed), code)
	w.dst, w.c = beginCompound(dst)
	w.keepLen = len(w.dst)
}

func (w *listWriter) finish() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	dst := w.dst[:w.keepLen]
	if w.keepCount == 0 {
		return append(dst[:w.c.start], tcList0), nil
	}
	return w.c.finish(dst, tcList8, tcList32, w.keepCount)
}

// kept records that the field just appended is not null.
func (w *listWriter) kept() {
	w.count++
	w.keepLen = len(w.dst)
	w.keepCount = w.count
}

func (w *listWriter) null() {
	w.dst = append(w.dst, tcNull)
	w.count++
}

// Field appenders: the opt* forms append null for the absent value (nil, false, "", 0
// where that is the default).

func (w *listWriter) boolean(v bool) { w.dst = appendBool(w.dst, v); w.kept() }

func (w *listWriter) optBool(v bool) {
	if !v {
		w.null()
		return
	}
	w.boolean(v)
}

func (w *listWriter) ubyte(v uint8) { w.dst = append(w.dst, tcUbyte, v); w.kept() }

func (w *listWriter) uint(v uint32) { w.dst = appendUint(w.dst, v); w.kept() }

func (w *listWriter) optUint(p *uint32) {
	if p == nil {
		w.null()
		return
	}
	w.uint(*p)
}

func (w *listWriter) nonZeroUint(v uint32) {
	if v == 0 {
		w.null()
		return
	}
	w.uint(v)
}

func (w *listWriter) optUshort(p *uint16) {
	if p == nil {
		w.null()
		return
	}
	w.dst = append(w.dst, tcUshort, byte(*p>>8), byte(*p))
	w.kept()
}

func (w *listWriter) nonZeroUlong(v uint64) {
	if v == 0 {
		w.null()
		return
	}
	w.dst = appendUlong(w.dst, v)
	w.kept()
}

func (w *listWriter) str(v string) { w.dst = appendString(w.dst, v); w.kept() }

func (w *listWriter) optStr(v string) {
	if v == "" {
		w.null()
		return
	}
	w.str(v)
}

func (w *listWriter) optStrPtr(p *string) {
	if p == nil {
		w.null()
		return
	}
	w.str(*p)
}

func (w *listWriter) symbol(v Symbol) { w.dst = appendSymbol(w.dst, v); w.kept() }

func (w *listWriter) optSymbol(v Symbol) {
	if v == "" {
		w.null()
		return
	}
	w.symbol(v)
}

func (w *listWriter) optSymbolPtr(p *Symbol) {
	if p == nil {
		w.null()
		return
	}
	w.symbol(*p)
}

// symbols appends a multiple symbol field as an array; empty is null.
func (w *listWriter) symbols(v []Symbol) {
	if len(v) == 0 {
		w.null()
		return
	}
	w.dst = appendSymbolArray(w.dst, v)
	w.kept()
}

func (w *listWriter) binary(v []byte) { w.dst = appendBinary(w.dst, v); w.kept() }

func (w *listWriter) optBinary(v []byte) {
	if v == nil {
		w.null()
		return
	}
	w.binary(v)
}

func (w *listWriter) optTime(p *time.Time) {
	if p == nil {
		w.null()
		return
	}
	w.dst = appendTimestamp(w.dst, *p)
	w.kept()
}

// value appends any AMQP value; nil is null.
func (w *listWriter) value(v any) {
	if v == nil {
		w.null()
		return
	}
	if w.err != nil {
		return
	}
	dst, err := appendValue(w.dst, v, 1)
	if err != nil {
		w.err = err
		return
	}
	w.dst = dst
	w.kept()
}

// optMap appends a map field; nil is null.
func (w *listWriter) optMap(m Map) {
	if m == nil {
		w.null()
		return
	}
	w.value(m)
}

// optComposite appends a composite field (Error, Source, Target, delivery state); nil is
// null.
func (w *listWriter) optComposite(c composite) {
	if c == nil {
		w.null()
		return
	}
	if rv := reflect.ValueOf(c); rv.Kind() == reflect.Pointer && rv.IsNil() {
		w.null()
		return
	}
	if w.err != nil {
		return
	}
	dst, err := appendComposite(w.dst, c)
	if err != nil {
		w.err = err
		return
	}
	w.dst = dst
	w.kept()
}

// fieldReader reads the fields of a composite's list in order. Errors are sticky: after
// the first, every read returns the zero value and err keeps the first error.
type fieldReader struct {
	d     decoder // over the remaining list elements
	left  uint32  // elements left
	idx   int     // index of the next field
	code  uint64  // descriptor code of the composite, for errors
	depth int
	err   error
}

// next reports whether the next field is present (neither beyond the list nor null) and
// leaves the decoder on its constructor; a null is consumed.
func (f *fieldReader) next() bool {
	if f.err != nil || f.left == 0 {
		f.idx++
		return false
	}
	f.left--
	f.idx++
	if len(f.d.b) > 0 && f.d.b[0] == tcNull {
		f.d.b = f.d.b[1:]
		return false
	}
	return true
}

func (f *fieldReader) fail(want string) {
	c := byte(0)
	if len(f.d.b) > 0 {
		c = f.d.b[0]
	}
	f.err = malformed("%s field %d: want %s, got constructor 0x%02x", compositeName(f.code), f.idx-1, want, c)
}

func (f *fieldReader) setErr(err error) {
	if f.err == nil && err != nil {
		f.err = fmt.Errorf("%s field %d: %w", compositeName(f.code), f.idx-1, err)
	}
}

func (f *fieldReader) missing(field string) {
	if f.err == nil {
		f.err = malformed("%s: mandatory field %s missing", compositeName(f.code), field)
	}
}

// typed reads the present field's constructor and, if it is one of codes, returns the
// decoded body.
func (f *fieldReader) typed(want string, codes ...byte) (any, bool) {
	if len(f.d.b) == 0 {
		f.setErr(malformed("truncated input"))
		return nil, false
	}
	c := f.d.b[0]
	for _, ok := range codes {
		if c == ok {
			f.d.b = f.d.b[1:]
			v, err := f.d.body(c, f.depth)
			if err != nil {
				f.setErr(err)
				return nil, false
			}
			return v, true
		}
	}
	f.fail(want)
	return nil, false
}

func (f *fieldReader) uintField() (uint32, bool) {
	if !f.next() {
		return 0, false
	}
	v, ok := f.typed("uint", tcUint0, tcSmallUint, tcUint)
	if !ok {
		return 0, false
	}
	return v.(uint32), true
}

func (f *fieldReader) mandatoryUint(field string) uint32 {
	v, ok := f.uintField()
	if !ok {
		f.missing(field)
	}
	return v
}

func (f *fieldReader) optUint() *uint32 {
	if v, ok := f.uintField(); ok {
		return &v
	}
	return nil
}

func (f *fieldReader) uint() uint32 {
	v, _ := f.uintField()
	return v
}

func (f *fieldReader) ulong() uint64 {
	if !f.next() {
		return 0
	}
	v, ok := f.typed("ulong", tcUlong0, tcSmallUlong, tcUlong)
	if !ok {
		return 0
	}
	return v.(uint64)
}

func (f *fieldReader) mandatoryUlong(field string) uint64 {
	if !f.next() {
		f.missing(field)
		return 0
	}
	v, ok := f.typed("ulong", tcUlong0, tcSmallUlong, tcUlong)
	if !ok {
		return 0
	}
	return v.(uint64)
}

func (f *fieldReader) optUshort() *uint16 {
	if !f.next() {
		return nil
	}
	v, ok := f.typed("ushort", tcUshort)
	if !ok {
		return nil
	}
	u := v.(uint16)
	return &u
}

func (f *fieldReader) ubyteField() (uint8, bool) {
	if !f.next() {
		return 0, false
	}
	v, ok := f.typed("ubyte", tcUbyte)
	if !ok {
		return 0, false
	}
	return v.(uint8), true
}

func (f *fieldReader) boolField() (bool, bool) {
	if !f.next() {
		return false, false
	}
	v, ok := f.typed("boolean", tcTrue, tcFalse, tcBool)
	if !ok {
		return false, false
	}
	return v.(bool), true
}

func (f *fieldReader) boolean() bool {
	v, _ := f.boolField()
	return v
}

func (f *fieldReader) mandatoryBool(field string) bool {
	v, ok := f.boolField()
	if !ok {
		f.missing(field)
	}
	return v
}

func (f *fieldReader) strField() (string, bool) {
	if !f.next() {
		return "", false
	}
	v, ok := f.typed("string", tcStr8, tcStr32)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func (f *fieldReader) str() string {
	v, _ := f.strField()
	return v
}

func (f *fieldReader) mandatoryStr(field string) string {
	v, ok := f.strField()
	if !ok {
		f.missing(field)
	}
	return v
}

func (f *fieldReader) optStrPtr() *string {
	if v, ok := f.strField(); ok {
		return &v
	}
	return nil
}

func (f *fieldReader) symbolField() (Symbol, bool) {
	if !f.next() {
		return "", false
	}
	v, ok := f.typed("symbol", tcSym8, tcSym32)
	if !ok {
		return "", false
	}
	return v.(Symbol), true
}

func (f *fieldReader) symbol() Symbol {
	v, _ := f.symbolField()
	return v
}

func (f *fieldReader) mandatorySymbol(field string) Symbol {
	v, ok := f.symbolField()
	if !ok {
		f.missing(field)
	}
	return v
}

func (f *fieldReader) optSymbolPtr() *Symbol {
	if v, ok := f.symbolField(); ok {
		return &v
	}
	return nil
}

// symbols reads a multiple symbol field: one symbol or an array of symbols.
func (f *fieldReader) symbols() []Symbol {
	if !f.next() {
		return nil
	}
	v, ok := f.typed("symbol or array of symbols", tcSym8, tcSym32, tcArray8, tcArray32)
	if !ok {
		return nil
	}
	switch v := v.(type) {
	case Symbol:
		return []Symbol{v}
	case Array:
		out := make([]Symbol, len(v))
		for i, e := range v {
			s, ok := e.(Symbol)
			if !ok {
				f.setErr(malformed("array element of type %T, want symbol", e))
				return nil
			}
			out[i] = s
		}
		return out
	}
	return nil
}

func (f *fieldReader) binaryField() ([]byte, bool) {
	if !f.next() {
		return nil, false
	}
	v, ok := f.typed("binary", tcVbin8, tcVbin32)
	if !ok {
		return nil, false
	}
	return v.([]byte), true
}

func (f *fieldReader) binary() []byte {
	v, _ := f.binaryField()
	return v
}

func (f *fieldReader) mandatoryBinary(field string) []byte {
	v, ok := f.binaryField()
	if !ok {
		f.missing(field)
	}
	return v
}

func (f *fieldReader) optTime() *time.Time {
	if !f.next() {
		return nil
	}
	v, ok := f.typed("timestamp", tcTimestamp)
	if !ok {
		return nil
	}
	t := v.(time.Time)
	return &t
}

func (f *fieldReader) mapField() Map {
	if !f.next() {
		return nil
	}
	v, ok := f.typed("map", tcMap8, tcMap32)
	if !ok {
		return nil
	}
	return v.(Map)
}

// compositeField reads a described-list field and returns the decoded composite, made by
// mk from the descriptor code (nil: a code that is not allowed there).
func (f *fieldReader) compositeField(want string, mk func(code uint64) composite) composite {
	if !f.next() {
		return nil
	}
	c, err := f.d.decodeComposite(f.depth+1, mk)
	if err != nil {
		f.setErr(err)
		return nil
	}
	if c == nil {
		f.err = malformed("%s field %d: want %s", compositeName(f.code), f.idx-1, want)
	}
	return c
}

func (f *fieldReader) errorField() *Error {
	c := f.compositeField("error", func(code uint64) composite {
		if code == CodeError {
			return new(Error)
		}
		return nil
	})
	e, _ := c.(*Error)
	return e
}

func (f *fieldReader) deliveryState() DeliveryState {
	c := f.compositeField("delivery state", func(code uint64) composite {
		if s := newDeliveryState(code); s != nil {
			return s
		}
		return nil
	})
	s, _ := c.(DeliveryState)
	return s
}

// newDeliveryState returns a new delivery state for code, or nil.
func newDeliveryState(code uint64) DeliveryState {
	switch code {
	case CodeReceived:
		return new(Received)
	case CodeAccepted:
		return new(Accepted)
	case CodeRejected:
		return new(Rejected)
	case CodeReleased:
		return new(Released)
	case CodeModified:
		return new(Modified)
	}
	return nil
}

// end checks what follows the last known field: further fields (allowed by the
// specification for extensions) must still be well-formed values; they are skipped.
func (f *fieldReader) end() error {
	for f.err == nil && f.left > 0 {
		f.left--
		if _, err := f.d.value(f.depth); err != nil {
			f.setErr(err)
		}
	}
	if f.err == nil && len(f.d.b) != 0 {
		f.err = malformed("%s: %d bytes after the last field", compositeName(f.code), len(f.d.b))
	}
	return f.err
}

// descriptorCode reads a descriptor (after the 0x00) and returns its numeric code; a
// symbolic descriptor is translated through descriptorNames, and unknown symbols give
// ok false.
func (d *decoder) descriptorCode(depth int) (code uint64, ok bool, err error) {
	v, err := d.value(depth)
	if err != nil {
		return 0, false, err
	}
	switch v := v.(type) {
	case uint64:
		return v, true, nil
	case Symbol:
		code, ok := descriptorNames[v]
		return code, ok, nil
	}
	return 0, false, malformed("descriptor of type %T (want ulong or symbol)", v)
}

// decodeComposite reads a described list, makes the composite with mk and decodes its
// fields. It returns (nil, nil) if mk returns nil for the descriptor.
func (d *decoder) decodeComposite(depth int, mk func(code uint64) composite) (composite, error) {
	if depth > MaxDepth {
		return nil, malformed("nesting deeper than %d", MaxDepth)
	}
	c, err := d.byte1()
	if err != nil {
		return nil, err
	}
	if c != tcDescribed {
		return nil, malformed("constructor 0x%02x where a described list was expected", c)
	}
	code, ok, err := d.descriptorCode(depth)
	if err != nil {
		return nil, err
	}
	var v composite
	if ok {
		v = mk(code)
	}
	if v == nil {
		return nil, nil
	}
	f, err := d.listFields(depth, code)
	if err != nil {
		return nil, err
	}
	if err := v.decodeFields(f); err != nil {
		return nil, err
	}
	if err := f.end(); err != nil {
		return nil, err
	}
	return v, nil
}

// listFields reads a list header (list0, list8 or list32) and returns a reader of its
// elements.
func (d *decoder) listFields(depth int, code uint64) (*fieldReader, error) {
	c, err := d.byte1()
	if err != nil {
		return nil, err
	}
	f := &fieldReader{code: code, depth: depth}
	switch c {
	case tcList0:
		return f, nil
	case tcList8, tcList32:
		sub, count, err := d.compound(c == tcList32, depth)
		if err != nil {
			return nil, err
		}
		if uint64(count) > uint64(len(sub.b)) {
			return nil, malformed("%s: list count %d exceeds its %d bytes", compositeName(code), count, len(sub.b))
		}
		f.d, f.left = sub, count
		return f, nil
	}
	return nil, malformed("%s: constructor 0x%02x where a list was expected", compositeName(code), c)
}

// compositeName names a descriptor code for error messages.
func compositeName(code uint64) string {
	for name, c := range descriptorNames {
		if c == code {
			return string(name)
		}
	}
	return fmt.Sprintf("0x%x", code)
}
