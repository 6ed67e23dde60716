package sqlfilter

import "fmt"

// likeMatcher is a compiled LIKE pattern: % matches any run of characters, _ exactly
// one, the escape character makes the next character literal.
type likeMatcher struct {
	elems []likeElem
}

type likeElem struct {
	kind byte // 'c' literal, '_' any one, '%' any run
	r    rune
}

// compileLike compiles pattern; esc < 0 means no escape character.
func compileLike(pattern string, esc rune) (likeMatcher, error) {
	var m likeMatcher
	rs := []rune(pattern)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case esc >= 0 && r == esc:
			if i+1 == len(rs) {
				return m, fmt.Errorf("LIKE pattern %q ends with its escape character", pattern)
			}
			i++
			m.elems = append(m.elems, likeElem{'c', rs[i]})
		case r == '%':
			if n := len(m.elems); n == 0 || m.elems[n-1].kind != '%' { // %% is %
				m.elems = append(m.elems, likeElem{'%', 0})
			}
		case r == '_':
			m.elems = append(m.elems, likeElem{'_', 0})
		default:
			m.elems = append(m.elems, likeElem{'c', r})
		}
	}
	return m, nil
}

// match reports whether s matches, case-sensitively, and the steps it took: one per
// character of s, one per character examined. It backtracks only to the last % seen, so
// it takes O(len(s) × len(pattern)) steps at worst; it gives up (not matching) once it
// took more than limit.
func (m likeMatcher) match(s string, limit int) (bool, int) {
	steps := len(s)
	if steps > limit {
		return false, steps
	}
	rs := []rune(s)
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(rs) {
		if steps++; steps > limit {
			return false, steps
		}
		switch {
		case p < len(m.elems) && m.elems[p].kind == '%':
			star, mark = p, i
			p++
		case p < len(m.elems) && (m.elems[p].kind == '_' || m.elems[p].r == rs[i]):
			p++
			i++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false, steps
		}
	}
	for p < len(m.elems) && m.elems[p].kind == '%' {
		p++
	}
	return p == len(m.elems), steps
}
