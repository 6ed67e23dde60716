package sqlfilter

import (
	"math"
	"strconv"
	"strings"
)

// Limits that keep hostile expressions cheap.
const (
	// MaxLength is the longest filter or action text accepted, in bytes: the service's
	// limit on a SQL filter or action (Service Bus quotas: 1,024 characters).
	MaxLength = 1024
	// MaxDepth bounds the nesting of parentheses and operators.
	MaxDepth = 64
	// MaxActionStatements is the service's limit on statements in one action (quotas:
	// 32 expressions per rule action).
	MaxActionStatements = 32
)

type parser struct {
	toks   []token
	i      int
	depth  int
	params map[string]any
}

func newParser(src string, params map[string]any) (*parser, error) {
	if len(src) > MaxLength {
		return nil, errAt(MaxLength, "expression longer than %d characters", MaxLength)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return &parser{toks: toks, params: params}, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isKw(kw string) bool { t := p.peek(); return t.kind == tKeyword && t.text == kw }
func (p *parser) isOp(op string) bool { t := p.peek(); return t.kind == tOp && t.text == op }

func (p *parser) acceptKw(kw string) bool {
	if p.isKw(kw) {
		p.i++
		return true
	}
	return false
}

func (p *parser) acceptOp(op string) bool {
	if p.isOp(op) {
		p.i++
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.acceptOp(op) {
		return p.unexpected("%q", op)
	}
	return nil
}

func (p *parser) unexpected(wantFormat string, args ...any) error {
	t := p.peek()
	got := strconv.Quote(t.text)
	if t.kind == tEOF {
		got = "end of expression"
	}
	return errAt(t.pos, "expected "+wantFormat+", found %s", append(args, got)...)
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(p.peek().pos, "expression nested deeper than %d", MaxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseOr: or := and { OR and }
func (p *parser) parseOr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	l, err := p.parseAnd()
	for err == nil && p.acceptKw("OR") {
		var r node
		if r, err = p.parseAnd(); err == nil {
			l = orNode{l, r}
		}
	}
	return l, err
}

// parseAnd: and := not { AND not }
func (p *parser) parseAnd() (node, error) {
	l, err := p.parseNot()
	for err == nil && p.acceptKw("AND") {
		var r node
		if r, err = p.parseNot(); err == nil {
			l = andNode{l, r}
		}
	}
	return l, err
}

// parseNot: not := NOT not | predicate
func (p *parser) parseNot() (node, error) {
	if p.acceptKw("NOT") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return notNode{x}, nil
	}
	return p.parsePredicate()
}

var compareOps = map[string]bool{"=": true, "<>": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}

// parsePredicate: an expression optionally followed by a comparison, [NOT] IN,
// [NOT] LIKE or IS [NOT] NULL.
func (p *parser) parsePredicate() (node, error) {
	l, err := p.parseAdd()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind == tOp && compareOps[t.text] {
		p.next()
		r, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		op := t.text
		if op == "!=" {
			op = "<>"
		}
		return cmpNode{op, l, r}, nil
	}
	if p.acceptKw("IS") {
		neg := p.acceptKw("NOT")
		if !p.acceptKw("NULL") {
			return nil, p.unexpected("NULL")
		}
		return isNullNode{l, neg}, nil
	}
	neg := false
	if p.isKw("NOT") {
		if n := p.toks[p.i+1]; n.kind == tKeyword && (n.text == "IN" || n.text == "LIKE") {
			p.next()
			neg = true
		} else {
			return nil, p.unexpected("IN or LIKE after NOT")
		}
	}
	switch {
	case p.acceptKw("IN"):
		n, err := p.parseIn(l)
		if err != nil {
			return nil, err
		}
		return maybeNot(n, neg), nil
	case p.acceptKw("LIKE"):
		n, err := p.parseLike(l)
		if err != nil {
			return nil, err
		}
		return maybeNot(n, neg), nil
	}
	return l, nil
}

func maybeNot(n node, neg bool) node {
	if neg {
		return notNode{n}
	}
	return n
}

func (p *parser) parseIn(l node) (node, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var items []node
	for {
		x, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if p.acceptOp(")") {
			return inNode{l, items}, nil
		}
		if err := p.expectOp(","); err != nil {
			return nil, err
		}
	}
}

// parseLike: the pattern and the escape character are string constants (or parameters).
func (p *parser) parseLike(l node) (node, error) {
	pos := p.peek().pos
	pat, err := p.stringConst("a pattern string")
	if err != nil {
		return nil, err
	}
	esc := rune(-1)
	if p.acceptKw("ESCAPE") {
		epos := p.peek().pos
		e, err := p.stringConst("an escape character string")
		if err != nil {
			return nil, err
		}
		rs := []rune(e)
		if len(rs) != 1 {
			return nil, errAt(epos, "the escape must be one character, got %q", e)
		}
		esc = rs[0]
	}
	m, err := compileLike(pat, esc)
	if err != nil {
		return nil, errAt(pos, "%v", err)
	}
	return likeNode{l, m}, nil
}

func (p *parser) stringConst(what string) (string, error) {
	t := p.peek()
	switch t.kind {
	case tString:
		p.next()
		return t.text, nil
	case tParam:
		p.next()
		v, err := p.param(t)
		if err != nil {
			return "", err
		}
		if s, ok := v.(string); ok {
			return s, nil
		}
		return "", errAt(t.pos, "parameter %s is not a string", t.text)
	}
	return "", p.unexpected(what)
}

// parseAdd: add := mul { (+|-) mul }
func (p *parser) parseAdd() (node, error) {
	l, err := p.parseMul()
	for err == nil && (p.isOp("+") || p.isOp("-")) {
		op := p.next().text
		var r node
		if r, err = p.parseMul(); err == nil {
			l = arithNode{op[0], l, r}
		}
	}
	return l, err
}

// parseMul: mul := unary { (*|/|%) unary }
func (p *parser) parseMul() (node, error) {
	l, err := p.parseUnary()
	for err == nil && (p.isOp("*") || p.isOp("/") || p.isOp("%")) {
		op := p.next().text
		var r node
		if r, err = p.parseUnary(); err == nil {
			l = arithNode{op[0], l, r}
		}
	}
	return l, err
}

// parseUnary: unary := (+|-) unary | primary
func (p *parser) parseUnary() (node, error) {
	if p.isOp("+") || p.isOp("-") {
		op := p.next().text
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return negNode{op[0], x}, nil
	}
	return p.parsePrimary()
}

func (p *parser) parsePrimary() (node, error) {
	t := p.peek()
	switch t.kind {
	case tInt:
		p.next()
		n, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			return nil, errAt(t.pos, "integer constant %s out of range", t.text)
		}
		return constNode{n}, nil
	case tFloat:
		p.next()
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, errAt(t.pos, "number %s out of range", t.text)
		}
		return constNode{f}, nil
	case tString:
		p.next()
		return constNode{t.text}, nil
	case tParam:
		p.next()
		v, err := p.param(t)
		if err != nil {
			return nil, err
		}
		return constNode{normalize(v)}, nil
	case tKeyword:
		switch t.text {
		case "TRUE", "FALSE":
			p.next()
			return constNode{t.text == "TRUE"}, nil
		case "NULL":
			p.next()
			return constNode{nil}, nil
		case "EXISTS":
			p.next()
			if err := p.expectOp("("); err != nil {
				return nil, err
			}
			pr, err := p.parseProperty()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return existsNode{pr}, nil
		}
	case tIdent:
		if n := p.toks[p.i+1]; n.kind == tOp && n.text == "(" {
			return p.parseFunction()
		}
		return p.parseProperty()
	case tOp:
		if t.text == "(" {
			p.next()
			x, err := p.parseOr()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return x, nil
		}
	}
	return nil, p.unexpected("an expression")
}

func (p *parser) param(t token) (any, error) {
	for _, k := range []string{t.text, t.text[1:]} {
		if v, ok := p.params[k]; ok {
			return v, nil
		}
	}
	return nil, errAt(t.pos, "parameter %s has no value", t.text)
}

func (p *parser) parseFunction() (node, error) {
	t := p.next()
	p.next() // (
	switch strings.ToLower(t.text) {
	case "newid":
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return newIDNode{}, nil
	case "property":
		x, err := p.parseAdd()
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
		return propertyFuncNode{x}, nil
	}
	return nil, errAt(t.pos, "unknown function %s", t.text)
}

// parseProperty: [sys. | user.] name
func (p *parser) parseProperty() (propNode, error) {
	t := p.next()
	if t.kind != tIdent {
		p.i--
		return propNode{}, p.unexpected("a property name")
	}
	scope := strings.ToLower(t.text)
	if (scope == "sys" || scope == "user") && p.isOp(".") {
		p.next()
		n := p.next()
		if n.kind != tIdent {
			p.i--
			return propNode{}, p.unexpected("a property name after %s.", t.text)
		}
		if scope == "user" {
			return propNode{name: n.text}, nil
		}
		name, settable, ok := canonicalSys(n.text)
		if !ok {
			return propNode{}, errAt(n.pos, "sys.%s is not a system property", n.text)
		}
		return propNode{sys: true, name: name, settable: settable, pos: n.pos}, nil
	}
	return propNode{name: t.text}, nil
}
