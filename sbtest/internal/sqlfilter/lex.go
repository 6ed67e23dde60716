package sqlfilter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tKeyword
	tInt
	tFloat
	tString
	tParam
	tOp // punctuation and operators: ( ) , . ; = <> != < <= > >= + - * / %
)

type token struct {
	kind tokKind
	text string // keyword upper-cased; identifier unquoted; string unescaped
	pos  int    // byte offset in the source
}

// keywords are reserved: a property with one of these names must be quoted or delimited.
var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IS": true, "NULL": true, "IN": true,
	"LIKE": true, "ESCAPE": true, "EXISTS": true, "TRUE": true, "FALSE": true,
	"SET": true, "REMOVE": true,
}

// SyntaxError is a malformed expression. Pos is the byte offset where the problem was
// found.
type SyntaxError struct {
	Pos int
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("sqlfilter: at offset %d: %s", e.Pos, e.Msg) }

func errAt(pos int, format string, args ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// lex splits src into tokens.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for i < len(src) {
		r, w := utf8.DecodeRuneInString(src[i:])
		switch {
		case unicode.IsSpace(r):
			i += w
		case r == '-' && strings.HasPrefix(src[i:], "--"):
			return nil, errAt(i, "comments are not supported")
		case unicode.IsLetter(r) || r == '_':
			j := i + w
			for j < len(src) {
				r2, w2 := utf8.DecodeRuneInString(src[j:])
				if !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || r2 == '_') {
					break
				}
				j += w2
			}
			word := src[i:j]
			if up := strings.ToUpper(word); keywords[up] {
				toks = append(toks, token{tKeyword, up, i})
			} else {
				toks = append(toks, token{tIdent, word, i})
			}
			i = j
		case r >= '0' && r <= '9':
			t, n, err := lexNumber(src, i)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i = n
		case r == '\'':
			s, n, err := lexQuoted(src, i, '\'', '\'')
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tString, s, i})
			i = n
		case r == '"':
			s, n, err := lexQuoted(src, i, '"', '"')
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tIdent, s, i})
			i = n
		case r == '[':
			s, n, err := lexQuoted(src, i, '[', ']')
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{tIdent, s, i})
			i = n
		case r == '@':
			j := i + 1
			for j < len(src) {
				r2, w2 := utf8.DecodeRuneInString(src[j:])
				if !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || r2 == '_') {
					break
				}
				j += w2
			}
			if j == i+1 {
				return nil, errAt(i, "parameter name expected after @")
			}
			toks = append(toks, token{tParam, src[i:j], i})
			i = j
		default:
			op := ""
			for _, o := range []string{"<>", "!=", "<=", ">="} {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" && strings.ContainsRune("(),.;=<>+-*/%", r) {
				op = string(r)
			}
			if op == "" {
				return nil, errAt(i, "unexpected character %q", r)
			}
			toks = append(toks, token{tOp, op, i})
			i += len(op)
		}
	}
	return append(toks, token{tEOF, "", len(src)}), nil
}

// lexNumber reads an integer (digits), a decimal (digits.digits) or an approximate
// number (digits[.digits]E[+-]digits) starting at i.
func lexNumber(src string, i int) (token, int, error) {
	j := i
	digits := func() int {
		k := j
		for j < len(src) && src[j] >= '0' && src[j] <= '9' {
			j++
		}
		return j - k
	}
	digits()
	kind := tInt
	if j < len(src) && src[j] == '.' {
		j++
		if digits() == 0 {
			return token{}, 0, errAt(j, "digits expected after the decimal point")
		}
		kind = tFloat
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		j++
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if digits() == 0 {
			return token{}, 0, errAt(j, "digits expected in the exponent")
		}
		kind = tFloat
	}
	if j < len(src) {
		if r, _ := utf8.DecodeRuneInString(src[j:]); unicode.IsLetter(r) || r == '_' {
			return token{}, 0, errAt(j, "letter directly after a number")
		}
	}
	return token{kind, src[i:j], i}, j, nil
}

// lexQuoted reads a string delimited by open and close starting at i; a doubled close
// character stands for itself.
func lexQuoted(src string, i int, open, close byte) (string, int, error) {
	var b strings.Builder
	j := i + 1
	for j < len(src) {
		if src[j] == close {
			if j+1 < len(src) && src[j+1] == close {
				b.WriteByte(close)
				j += 2
				continue
			}
			return b.String(), j + 1, nil
		}
		b.WriteByte(src[j])
		j++
	}
	return "", 0, errAt(i, "unterminated %c", open)
}
