package sqlfilter

// Filter is a parsed SQL filter expression. It is immutable and safe for concurrent use.
type Filter struct {
	text string
	root node
}

// ParseFilter parses a SQL filter. params gives the values of @name parameters (keys
// with or without the @). It returns a *SyntaxError for malformed or oversized text or
// an unknown system property.
func ParseFilter(text string, params map[string]any) (*Filter, error) {
	p, err := newParser(text, params)
	if err != nil {
		return nil, err
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, p.unexpected("end of expression")
	}
	return &Filter{text: text, root: root}, nil
}

// String returns the filter's text.
func (f *Filter) String() string { return f.text }

// Match reports whether the filter is true for m; unknown and non-boolean results do not
// match. The evaluation draws from b: it returns ErrCostExceeded (wrapped) when b runs
// out.
func (f *Filter) Match(m Message, b *Budget) (bool, error) {
	v, ok := f.root.eval(b.ctx(m)).(bool)
	if err := b.exceeded(); err != nil {
		return false, err
	}
	return ok && v, nil
}

// Action is a parsed SQL rule action: SET and REMOVE statements applied in order. It is
// immutable and safe for concurrent use.
type Action struct {
	text  string
	stmts []stmt
}

type stmt struct {
	prop   propNode
	value  node // nil for REMOVE
	remove bool
}

// ParseAction parses a SQL rule action. params as for ParseFilter. SET may target user
// properties and the settable system properties (the string ones: sys.Label,
// sys.To, ...); REMOVE only user properties.
func ParseAction(text string, params map[string]any) (*Action, error) {
	p, err := newParser(text, params)
	if err != nil {
		return nil, err
	}
	a := &Action{text: text}
	for p.peek().kind != tEOF {
		if len(a.stmts) == MaxActionStatements {
			return nil, errAt(p.peek().pos, "more than %d statements", MaxActionStatements)
		}
		pos := p.peek().pos
		var s stmt
		switch {
		case p.acceptKw("SET"):
			if s.prop, err = p.parseProperty(); err != nil {
				return nil, err
			}
			if s.prop.sys && !s.prop.settable {
				return nil, errAt(s.prop.pos, "sys.%s cannot be set", s.prop.name)
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			if s.value, err = p.parseOr(); err != nil {
				return nil, err
			}
		case p.acceptKw("REMOVE"):
			if s.prop, err = p.parseProperty(); err != nil {
				return nil, err
			}
			if s.prop.sys {
				return nil, errAt(s.prop.pos, "sys.%s cannot be removed", s.prop.name)
			}
			s.remove = true
		default:
			return nil, errAt(pos, "expected SET or REMOVE, found %q", p.peek().text)
		}
		a.stmts = append(a.stmts, s)
		for p.acceptOp(";") || p.acceptOp(",") {
		}
	}
	if len(a.stmts) == 0 {
		return nil, errAt(0, "empty action")
	}
	return a, nil
}

// String returns the action's text.
func (a *Action) String() string { return a.text }

// Apply runs the statements on m in order; each SET sees the effect of the ones before
// it. A system property is set to its value only when that value is a string (or
// unknown, which unsets it); otherwise the statement does nothing. The evaluation draws
// from b: when b runs out, Apply stops and returns ErrCostExceeded (wrapped), leaving m
// partly changed (discard it).
func (a *Action) Apply(m MutableMessage, b *Budget) error {
	c := b.ctx(m)
	for _, s := range a.stmts {
		if s.remove {
			m.RemoveProperty(s.prop.name)
			continue
		}
		v := s.value.eval(c)
		if err := b.exceeded(); err != nil {
			return err
		}
		if s.prop.sys {
			if _, ok := v.(string); !ok && v != nil {
				continue
			}
		}
		m.SetProperty(s.prop.sys, s.prop.name, v)
	}
	return nil
}
