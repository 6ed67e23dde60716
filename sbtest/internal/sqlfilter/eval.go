package sqlfilter

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sbkit/sbkit/internal/guid"
)

// maxString bounds the strings that + builds: a longer result is unknown.
const maxString = 1 << 20

// MaxEvalCost bounds the work of evaluating one message (every filter and action that
// share a [Budget]), in steps: a byte of a string that + builds, compares or that
// property() reads as a name, a character LIKE examines. The service bounds the text
// of a filter (MaxLength) and the size of a message's properties, not the work; this
// bound is sbtest's own. 1,048,576 steps take a few milliseconds: a LIKE or a
// comparison over a 256 KiB property fits, a filter that concatenates a property into
// a megabyte and matches it with a backtracking pattern does not.
const MaxEvalCost = 1 << 20

// ErrCostExceeded is returned by [Filter.Match] and [Action.Apply] when the evaluation
// needs more than its [Budget]: its result is unknown and must be discarded.
var ErrCostExceeded = errors.New("sqlfilter: the evaluation exceeds its cost bound")

// Budget is the work left for evaluating one message; filters and actions given the
// same Budget draw from it. Create one with NewBudget; it is not safe for concurrent
// use.
type Budget struct {
	left int
	c    evalCtx // the evaluation under way, kept here so that it costs no allocation
}

// NewBudget returns a budget of MaxEvalCost steps.
func NewBudget() *Budget { return &Budget{left: MaxEvalCost} }

// ctx returns the context of an evaluation of m drawing from b.
func (b *Budget) ctx(m Message) *evalCtx {
	b.c = evalCtx{m: m, b: b}
	return &b.c
}

// exceeded returns ErrCostExceeded (wrapped) once the budget is spent, else nil.
func (b *Budget) exceeded() error {
	if b.left < 0 {
		return fmt.Errorf("%w: more than %d steps", ErrCostExceeded, MaxEvalCost)
	}
	return nil
}

// evalCtx is one evaluation: the message and the budget it draws from.
type evalCtx struct {
	m Message
	b *Budget
}

// spend charges n steps and reports whether the budget still holds them; once it does
// not, every operation that costs steps is unknown, so the evaluation ends quickly.
func (c *evalCtx) spend(n int) bool {
	c.b.left -= n
	return c.b.left >= 0
}

// compare is compare that charges a string comparison its length.
func (c *evalCtx) compare(a, b any) (int, bool) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok && !c.spend(min(len(x), len(y))) {
			return 0, false
		}
	}
	return compare(a, b)
}

// node is a parsed expression. eval returns nil for unknown, or a bool, int64,
// float64, string, [time.Time], or another normalized property value.
type node interface {
	eval(c *evalCtx) any
}

type constNode struct{ v any }

func (n constNode) eval(*evalCtx) any { return n.v }

type propNode struct {
	sys      bool
	name     string
	settable bool
	pos      int
}

func (n propNode) eval(c *evalCtx) any {
	v, _ := c.m.Property(n.sys, n.name)
	return normalize(v)
}

type existsNode struct{ p propNode }

func (n existsNode) eval(c *evalCtx) any {
	_, ok := c.m.Property(n.p.sys, n.p.name)
	return ok
}

type isNullNode struct {
	x   node
	neg bool
}

func (n isNullNode) eval(c *evalCtx) any { return (n.x.eval(c) == nil) != n.neg }

type notNode struct{ x node }

func (n notNode) eval(c *evalCtx) any {
	if b, ok := n.x.eval(c).(bool); ok {
		return !b
	}
	return nil
}

type andNode struct{ l, r node }

// eval is three-valued: false wins over unknown.
func (n andNode) eval(c *evalCtx) any {
	l, lok := n.l.eval(c).(bool)
	if lok && !l {
		return false
	}
	r, rok := n.r.eval(c).(bool)
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
func (n orNode) eval(c *evalCtx) any {
	l, lok := n.l.eval(c).(bool)
	if lok && l {
		return true
	}
	r, rok := n.r.eval(c).(bool)
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

func (n cmpNode) eval(c *evalCtx) any {
	r, ok := c.compare(n.l.eval(c), n.r.eval(c))
	if !ok {
		return nil
	}
	switch n.op {
	case "=":
		return r == 0
	case "<>":
		return r != 0
	}
	if r == cmpUnordered {
		return nil
	}
	switch n.op {
	case "<":
		return r < 0
	case "<=":
		return r <= 0
	case ">":
		return r > 0
	default:
		return r >= 0
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
func (n inNode) eval(c *evalCtx) any {
	x := n.x.eval(c)
	if x == nil {
		return nil
	}
	unknown := false
	for _, it := range n.items {
		r, ok := c.compare(x, it.eval(c))
		if !ok {
			unknown = true
			continue
		}
		if r == 0 {
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

func (n likeNode) eval(c *evalCtx) any {
	s, ok := n.x.eval(c).(string)
	if !ok {
		return nil
	}
	ok, steps := n.m.match(s, c.b.left)
	if !c.spend(steps) {
		return nil
	}
	return ok
}

type negNode struct {
	op byte
	x  node
}

func (n negNode) eval(c *evalCtx) any { return negate(n.op, n.x.eval(c)) }

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

func (n arithNode) eval(c *evalCtx) any { return c.arith(n.op, n.l.eval(c), n.r.eval(c)) }

// arith applies op with C#'s promotions: int64 op int64 stays int64 (wrapping, a zero
// divisor is unknown), a float64 on either side makes float64, + joins two strings
// (charged the bytes it copies).
func (c *evalCtx) arith(op byte, a, b any) any {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok && op == '+' && len(x)+len(y) <= maxString && c.spend(len(x)+len(y)) {
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

func (newIDNode) eval(*evalCtx) any {
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

func (n propertyFuncNode) eval(c *evalCtx) any {
	s, ok := n.x.eval(c).(string)
	if !ok || !c.spend(len(s)) {
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
	v, _ := c.m.Property(sys, s)
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
