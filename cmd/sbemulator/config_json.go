package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/tailscale/hujson"
)

// Microsoft's emulator ships its Config.json with // comments, so the file is read as
// JSON with comments and trailing commas (HuJSON, github.com/tailscale/hujson), turned
// into standard JSON with the same byte offsets (comments become spaces), and every error
// about it names a line and a column.

// configJSON is a configuration file's content: standard JSON and the parsed tree of the
// original, whose offsets are the same.
type configJSON struct {
	std  []byte
	tree hujson.Value
}

// readConfigJSON parses b as JSON with comments. A syntax error names its line and
// column.
func readConfigJSON(b []byte) (*configJSON, error) {
	if err := checkDepth(b); err != nil {
		return nil, err
	}
	tree, err := hujson.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", errConfig, strings.TrimPrefix(err.Error(), "hujson: "))
	}
	// Standardized from the bytes, not from tree.Clone(), which drops trailing commas
	// and so shifts the offsets after them.
	std, err := hujson.Standardize(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errConfig, err)
	}
	return &configJSON{std: std, tree: tree}, nil
}

// maxConfigDepth bounds how deeply objects and arrays nest in a configuration file:
// Microsoft's Config.json nests 13 levels (a correlation filter's properties inside a
// rule inside a subscription inside a topic inside a namespace); the parser recurses
// once per level, so a file nested millions deep would exhaust the stack before any
// other check could refuse it.
const maxConfigDepth = 64

// checkDepth refuses b when its objects and arrays nest deeper than maxConfigDepth,
// naming the line and column where they do; strings and comments do not count.
func checkDepth(b []byte) error {
	depth, line, col := 0, 1, 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		col++
		switch {
		case c == '\n':
			line, col = line+1, 0
		case c == '"': // a string: skip to its end, past escapes
			for i++; i < len(b) && b[i] != '"'; i++ {
				col++
				if b[i] == '\\' {
					i++
					col++
				}
			}
			col++
		case c == '/' && i+1 < len(b) && b[i+1] == '/': // a line comment
			for i < len(b) && b[i] != '\n' {
				i++
			}
			i--
		case c == '/' && i+1 < len(b) && b[i+1] == '*': // a block comment
			end := bytes.Index(b[i+2:], []byte("*/"))
			if end < 0 {
				return nil // unterminated: the parser says so
			}
			skipped := b[i : i+2+end+2]
			if n := bytes.Count(skipped, []byte("\n")); n > 0 {
				line += n
				col = len(skipped) - bytes.LastIndexByte(skipped, '\n') - 1
			} else {
				col += len(skipped) - 1
			}
			i += len(skipped) - 1
		case c == '{' || c == '[':
			if depth++; depth > maxConfigDepth {
				return fmt.Errorf("%w: line %d, column %d: objects and arrays nested more than %d deep", errConfig, line, col, maxConfigDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}

// position is "line L, column C" of byte offset off (both counted from 1).
func (c *configJSON) position(off int) string {
	off = min(max(off, 0), len(c.std))
	line := 1 + bytes.Count(c.std[:off], []byte("\n"))
	col := 1 + off - (bytes.LastIndexByte(c.std[:off], '\n') + 1)
	return fmt.Sprintf("line %d, column %d", line, col)
}

// keyPosition is the position of the key that the JSON pointer ptr (RFC 6901) ends
// with, or "" when the file has no such key.
func (c *configJSON) keyPosition(ptr string) string {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return ""
	}
	parent := c.tree.Find(ptr[:i])
	if parent == nil {
		return ""
	}
	obj, ok := parent.Value.(*hujson.Object)
	if !ok {
		return ""
	}
	key := strings.NewReplacer("~1", "/", "~0", "~").Replace(ptr[i+1:])
	for _, m := range obj.Members {
		if lit, ok := m.Name.Value.(hujson.Literal); ok && lit.String() == key {
			return c.position(m.Name.StartOffset)
		}
	}
	return ""
}

// positionAt is the position of the value at path, followed by ": ", or "" when the
// file has none there. path holds object keys, matched as encoding/json matches them
// (the last member of that name, exactly or else case-insensitively), and array
// indexes.
func (c *configJSON) positionAt(path ...any) string {
	v := &c.tree
	for _, p := range path {
		switch p := p.(type) {
		case string:
			obj, ok := v.Value.(*hujson.Object)
			if !ok {
				return ""
			}
			var exact, folded *hujson.Value
			for i := range obj.Members {
				name, _ := obj.Members[i].Name.Value.(hujson.Literal)
				switch {
				case name.String() == p:
					exact = &obj.Members[i].Value
				case strings.EqualFold(name.String(), p):
					folded = &obj.Members[i].Value
				}
			}
			if v = exact; v == nil {
				v = folded
			}
			if v == nil {
				return ""
			}
		case int:
			arr, ok := v.Value.(*hujson.Array)
			if !ok || p < 0 || p >= len(arr.Elements) {
				return ""
			}
			v = &arr.Elements[p]
		}
	}
	return c.position(v.StartOffset) + ": "
}

// jsonKind names what a JSON value must be to decode into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.String()
}

// unmarshal decodes the standard JSON into v; a value of the wrong type is an error
// naming its position and field.
func (c *configJSON) unmarshal(v any) error {
	err := json.Unmarshal(c.std, v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return fmt.Errorf("%w: %s: %s is %s, want %s", errConfig, c.position(c.valueStart(int(te.Offset))), te.Field, te.Value, jsonKind(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("%w: %s: %v", errConfig, c.position(int(se.Offset)), err)
	}
	return fmt.Errorf("%w: %v", errConfig, err)
}

// valueStart is the offset where the value that ends at end starts (encoding/json
// reports a type error after the value it read), or end when none does.
func (c *configJSON) valueStart(end int) int {
	for v := range c.tree.All() {
		if v.EndOffset == end && v.Value.Kind() != '{' && v.Value.Kind() != '[' {
			return v.StartOffset
		}
	}
	return end
}

// pointerToken escapes a key for a JSON pointer (RFC 6901: ~ as ~0, / as ~1).
func pointerToken(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}
