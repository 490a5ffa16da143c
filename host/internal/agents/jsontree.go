package agents

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"
)

// This file reads JSON into a tree of nodes that remember where each
// value starts, so that Parse can name the line and column of whatever it
// refuses. encoding/json keeps no positions, and the offsets of its syntax
// errors are not those of the character at fault; the scanner here is
// RFC 8259 JSON, nothing more: one value, with whitespace around it.
// Duplicate member names are refused (an object that says two things is
// not trusted to mean either); so is nesting deeper than maxDepth.

// maxDepth is the deepest nesting of arrays and objects read. The
// registry's own structure is five deep; a hundred leaves room for any
// extension a newer registry adds, and keeps a hostile input from
// recursing without end.
const maxDepth = 100

// nodeKind is the kind of a JSON value.
type nodeKind uint8

const (
	kindNull nodeKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// String names the kind as an error message does ("a number").
func (k nodeKind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// node is one JSON value and the byte offset where it starts.
type node struct {
	off     int
	kind    nodeKind
	str     string   // a string's value
	members []member // an object's members, in order
	elems   []*node  // an array's elements
}

// member is one member of an object and the offset of its name.
type member struct {
	name string
	off  int
	val  *node
}

// member returns the object's member of that name, or nil when it has
// none or its value is null: the registry gives null no other meaning
// than absence.
func (n *node) member(name string) *member {
	for i := range n.members {
		if m := &n.members[i]; m.name == name {
			if m.val.kind == kindNull {
				return nil
			}
			return m
		}
	}
	return nil
}

// syntaxError is a JSON syntax error at a byte offset.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// readTree reads data as one JSON value.
func readTree(data []byte) (*node, error) {
	s := scanner{data: data}
	s.space()
	n, err := s.value(0)
	if err != nil {
		return nil, err
	}
	s.space()
	if s.pos < len(s.data) {
		return nil, s.fail("%s after the top-level value", s.found())
	}
	return n, nil
}

type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) fail(format string, args ...any) error {
	return &syntaxError{off: s.pos, msg: fmt.Sprintf(format, args...)}
}

// found describes the byte at the position, for "want X, found Y".
func (s *scanner) found() string {
	if s.pos >= len(s.data) {
		return "the end of the input"
	}
	r, _ := utf8.DecodeRune(s.data[s.pos:])
	if r == utf8.RuneError || r < ' ' {
		return fmt.Sprintf("byte 0x%02x", s.data[s.pos])
	}
	return fmt.Sprintf("%q", r)
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value reads the value at the position (after whitespace).
func (s *scanner) value(depth int) (*node, error) {
	if s.pos >= len(s.data) {
		return nil, s.fail("unexpected end of the input, want a value")
	}
	n := &node{off: s.pos}
	switch c := s.data[s.pos]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return nil, s.fail("nested more than %d deep", maxDepth)
		}
		if c == '{' {
			return n, s.object(n, depth+1)
		}
		return n, s.array(n, depth+1)
	case c == '"':
		str, err := s.string()
		n.kind, n.str = kindString, str
		return n, err
	case c == '-' || c >= '0' && c <= '9':
		n.kind = kindNumber
		return n, s.number()
	case c == 't':
		n.kind = kindBool
		return n, s.literal("true")
	case c == 'f':
		n.kind = kindBool
		return n, s.literal("false")
	case c == 'n':
		n.kind = kindNull
		return n, s.literal("null")
	}
	return nil, s.fail("want a value, found %s", s.found())
}

func (s *scanner) object(n *node, depth int) error {
	n.kind = kindObject
	var seen names
	s.pos++ // {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("want a member name (a string), found %s", s.found())
		}
		off := s.pos
		name, err := s.string()
		if err != nil {
			return err
		}
		if seen.has(n.members, name) {
			s.pos = off
			return s.fail("duplicate member %q", name)
		}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("want ':' after the member name, found %s", s.found())
		}
		s.pos++
		s.space()
		v, err := s.value(depth)
		if err != nil {
			return err
		}
		n.members = append(n.members, member{name: name, off: off, val: v})
		s.space()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.space()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			return nil
		}
		return s.fail("want ',' or '}' after an object member, found %s", s.found())
	}
}

// names finds a name among an object's members: by looking through a
// few, by a map once there are more (an object of a million members
// is read in linear time).
type names map[string]bool

func (ns *names) has(members []member, name string) bool {
	const few = 16
	if len(members) < few {
		return slices.ContainsFunc(members, func(m member) bool { return m.name == name })
	}
	if *ns == nil {
		*ns = make(names, 2*few)
		for _, m := range members {
			(*ns)[m.name] = true
		}
	}
	if (*ns)[name] {
		return true
	}
	(*ns)[name] = true
	return false
}

func (s *scanner) array(n *node, depth int) error {
	n.kind = kindArray
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for {
		v, err := s.value(depth)
		if err != nil {
			return err
		}
		n.elems = append(n.elems, v)
		s.space()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.space()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			return nil
		}
		return s.fail("want ',' or ']' after an array element, found %s", s.found())
	}
}

// string reads a string literal; encoding/json decodes it once the
// scanner has checked it (escapes, control characters), turning invalid
// UTF-8 into U+FFFD as it always does.
func (s *scanner) string() (string, error) {
	start := s.pos
	s.pos++ // "
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == '"':
			s.pos++
			var str string
			if err := json.Unmarshal(s.data[start:s.pos], &str); err != nil {
				s.pos = start
				return "", s.fail("bad string: %v", err) // not reached: the literal was checked
			}
			return str, nil
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return "", s.fail("unexpected end of the input in a string")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) || !isHex(s.data[s.pos]) {
						return "", s.fail("want a hex digit in a \\u escape, found %s", s.found())
					}
					s.pos++
				}
			default:
				return "", s.fail("invalid escape '\\' %s in a string", s.found())
			}
		case c < ' ':
			return "", s.fail("control character %s in a string (escape it)", s.found())
		default:
			s.pos++
		}
	}
	return "", s.fail("unexpected end of the input in a string")
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() error {
	digits := func() error {
		if s.pos >= len(s.data) || !isDigit(s.data[s.pos]) {
			return s.fail("want a digit in a number, found %s", s.found())
		}
		for s.pos < len(s.data) && isDigit(s.data[s.pos]) {
			s.pos++
		}
		return nil
	}
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if err := digits(); err != nil {
		return err
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if err := digits(); err != nil {
			return err
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		return digits()
	}
	return nil
}

func (s *scanner) literal(word string) error {
	for i := range len(word) {
		if s.pos >= len(s.data) || s.data[s.pos] != word[i] {
			return s.fail("want %s, found %s", word, s.found())
		}
		s.pos++
	}
	return nil
}
