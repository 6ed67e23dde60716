package sqlfilter

import (
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sbkit/sbkit/internal/guid"
)

// maxString bounds the strings that + builds, so that a short expression cannot
// allocate without limit.
const maxString = 1 << 20

// node is a parsed expression. eval returns nil for unknown, or a bool, int64,
// float64, string, [time.Time], or another normalized property value.
type node interface {
	eval(m Message) any
}

type constNode struct{ v any }

func (n constNode) eval(Message) any { return n.v }

type propNode struct {
	sys      bool
	name     string
	settable bool
	pos      int
}

func (n propNode) eval(m Message) any {
	v, _ := m.Property(n.sys, n.name)
	return normalize(v)
}

type existsNode struct{ p propNode }

func (n existsNode) eval(m Message) any {
	_, ok := m.Property(n.p.sys, n.p.name)
	return ok
}

type isNullNode struct {
	x   node
	neg bool
}

func (n isNullNode) eval(m Message) any { return (n.x.eval(m) == nil) != n.neg }

type notNode struct{ x node }

func (n notNode) eval(m Message) any {
	if b, ok := n.x.eval(m).(bool); ok {
		return !b
	}
	return nil
}

type andNode struct{ l, r node }

// eval is three-valued: false wins over unknown.
func (n andNode) eval(m Message) any {
	l, lok := n.l.eval(m).(bool)
	if lok && !l {
		return false
	}
	r, rok := n.r.eval(m).(bool)
	switch {
	case rok && !r:
		return false
	case lok && rok:
		return true
	}
	return nil
}

type orNode struct{ l, r node }

// eval is three-valued: true wins over unknown.
func (n orNode) eval(m Message) any {
	l, lok := n.l.eval(m).(bool)
	if lok && l {
		return true
	}
	r, rok := n.r.eval(m).(bool)
	switch {
	case rok && r:
		return true
	case lok && rok:
		return false
	}
	return nil
}

type cmpNode struct {
	op   string
	l, r node
}

func (n cmpNode) eval(m Message) any {
	c, ok := compare(n.l.eval(m), n.r.eval(m))
	if !ok {
		return nil
	}
	switch n.op {
	case "=":
		return c == 0
	case "<>":
		return c != 0
	}
	if c == cmpUnordered {
		return nil
	}
	switch n.op {
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	default:
		return c >= 0
	}
}

// cmpUnordered is what compare returns for two different values of a type with no
// order (booleans, opaque values): = and <> work, the others are unknown.
const cmpUnordered = 2

// compare orders a and b: -1, 0, 1, or cmpUnordered for unequal values without an
// order. ok is false when either is unknown or their types do not meet.
func compare(a, b any) (int, bool) {
	if a == nil || b == nil {
		return 0, false
	}
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return cmpOrdered(x, y), true
		case float64:
			return cmpFloat(float64(x), y)
		}
	case float64:
		switch y := b.(type) {
		case int64:
			return cmpFloat(x, float64(y))
		case float64:
			return cmpFloat(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), true
		}
	case bool:
		if y, ok := b.(bool); ok {
			if x == y {
				return 0, true
			}
			return cmpUnordered, true
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y), true
		}
	}
	return 0, false
}

func cmpOrdered[T int64 | string](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func cmpFloat(x, y float64) (int, bool) {
	if math.IsNaN(x) || math.IsNaN(y) {
		return 0, false
	}
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	}
	return 0, true
}

type inNode struct {
	x     node
	items []node
}

// eval follows SQL: true if any item equals x, else unknown if x or any item is
// unknown, else false.
func (n inNode) eval(m Message) any {
	x := n.x.eval(m)
	if x == nil {
		return nil
	}
	unknown := false
	for _, it := range n.items {
		c, ok := compare(x, it.eval(m))
		if !ok {
			unknown = true
			continue
		}
		if c == 0 {
			return true
		}
	}
	if unknown {
		return nil
	}
	return false
}

type likeNode struct {
	x node
	m likeMatcher
}

func (n likeNode) eval(m Message) any {
	s, ok := n.x.eval(m).(string)
	if !ok {
		return nil
	}
	return n.m.match(s)
}

type negNode struct {
	op byte
	x  node
}

func (n negNode) eval(m Message) any { return negate(n.op, n.x.eval(m)) }

func negate(op byte, v any) any {
	switch x := v.(type) {
	case int64:
		if op == '-' {
			return -x
		}
		return x
	case float64:
		if op == '-' {
			return -x
		}
		return x
	}
	return nil
}

type arithNode struct {
	op   byte
	l, r node
}

func (n arithNode) eval(m Message) any { return arith(n.op, n.l.eval(m), n.r.eval(m)) }

// arith applies op with C#'s promotions: int64 op int64 stays int64 (wrapping, a zero
// divisor is unknown), a float64 on either side makes float64, + joins two strings.
func arith(op byte, a, b any) any {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok && op == '+' && len(x)+len(y) <= maxString {
			return x + y
		}
		return nil
	}
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			if y == 0 && (op == '/' || op == '%') {
				return nil
			}
			if op == '%' {
				return x % y
			}
			return binop(op, x, y)
		}
	}
	x, ok1 := toFloat(a)
	y, ok2 := toFloat(b)
	if !ok1 || !ok2 {
		return nil
	}
	if op == '%' {
		return math.Mod(x, y)
	}
	return binop(op, x, y)
}

func binop[T int64 | float64](op byte, x, y T) T {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	}
	return x / y
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

type newIDNode struct{}

func (newIDNode) eval(Message) any {
	var u [16]byte
	a, b := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		u[i], u[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return guid.Format(u)
}

// propertyFuncNode is property(name): the property whose name the argument evaluates
// to; "sys." and "user." prefixes choose the scope.
type propertyFuncNode struct{ x node }

func (n propertyFuncNode) eval(m Message) any {
	s, ok := n.x.eval(m).(string)
	if !ok {
		return nil
	}
	sys := false
	switch l := strings.ToLower(s); {
	case strings.HasPrefix(l, "sys."):
		name, _, ok := canonicalSys(s[4:])
		if !ok {
			return nil
		}
		s, sys = name, true
	case strings.HasPrefix(l, "user."):
		s = s[5:]
	}
	v, _ := m.Property(sys, s)
	return normalize(v)
}

// normalize widens a property value to the evaluator's types: every integer type to
// int64 (a uint64 above MaxInt64 to float64), float32 to float64. Other types are kept
// as they are; compare treats the unknown ones as meeting nothing.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return normalize(uint64(x))
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return float64(x)
		}
		return int64(x)
	case float32:
		return float64(x)
	}
	return v
}
