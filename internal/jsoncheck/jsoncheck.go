package jsoncheck

import (
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting of arrays and objects that Valid accepts:
// 128 levels, serde_json's default recursion limit. Real chat-completion
// bodies nest fewer than 20 (OpenAI's structured outputs allow 10 levels of
// schema), and a recursive parser's stack at 128 levels stays in kilobytes.
// encoding/json allows 10,000.
const MaxDepth = 128

// ErrTooDeep is what an *Error matches with errors.Is when the text nests
// arrays and objects deeper than MaxDepth.
var ErrTooDeep = errors.New("jsoncheck: " + tooDeep)

var tooDeep = "nested deeper than " + strconv.Itoa(MaxDepth) + " levels"

// Error says why a text is not accepted and where. It is a value, safe to
// share.
type Error struct {
	Offset  int    // the byte offset at which the text stopped being valid
	Reason  string // what was wrong there
	tooDeep bool
}

// Error returns "jsoncheck: REASON at byte OFFSET".
func (e *Error) Error() string {
	return "jsoncheck: " + e.Reason + " at byte " + strconv.Itoa(e.Offset)
}

// Is reports whether target is ErrTooDeep and the text was too deep.
func (e *Error) Is(target error) bool { return target == ErrTooDeep && e.tooDeep }

func fail(i int, reason string) error { return &Error{Offset: i, Reason: reason} }

// Valid returns nil when data is one JSON value, optionally surrounded by
// white space, nesting at most MaxDepth arrays and objects; otherwise an
// *Error (matching ErrTooDeep when only the depth was wrong). It allocates
// nothing when data is valid, reads each byte once, and uses a fixed stack.
func Valid(data []byte) error {
	var objects [MaxDepth / 64]uint64 // bit d: the container at depth d is an object
	depth := 0
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return fail(i, "unexpected end of input")
		}
		switch c := data[i]; c {
		case '{', '[':
			if depth == MaxDepth {
				return &Error{Offset: i, Reason: tooDeep, tooDeep: true}
			}
			word, bit := depth/64, uint64(1)<<(depth%64)
			if c == '{' {
				objects[word] |= bit
			} else {
				objects[word] &^= bit
			}
			depth++
			i = skipSpace(data, i+1)
			if i < len(data) && (c == '{' && data[i] == '}' || c == '[' && data[i] == ']') {
				depth--
				i++
				break // an empty container is a whole value
			}
			if c == '{' {
				var err error
				if i, err = key(data, i); err != nil {
					return err
				}
			}
			continue // its first value
		case '"':
			var ok bool
			if i, ok = scanString(data, i+1); !ok {
				return fail(i, "invalid string")
			}
		case 't':
			if !literal(data, i, "true") {
				return fail(i, "invalid literal")
			}
			i += 4
		case 'f':
			if !literal(data, i, "false") {
				return fail(i, "invalid literal")
			}
			i += 5
		case 'n':
			if !literal(data, i, "null") {
				return fail(i, "invalid literal")
			}
			i += 4
		default:
			var ok bool
			if i, ok = scanNumber(data, i); !ok {
				return fail(i, "invalid value")
			}
		}
		// A value ended at i: close containers until one continues.
		for {
			i = skipSpace(data, i)
			if depth == 0 {
				if i != len(data) {
					return fail(i, "data after the value")
				}
				return nil
			}
			if i >= len(data) {
				return fail(i, "unexpected end of input")
			}
			obj := objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if obj {
					var err error
					if i, err = key(data, i); err != nil {
						return err
					}
				}
				break
			}
			if obj && c == '}' || !obj && c == ']' {
				depth--
				i++
				continue
			}
			return fail(i, "want ',' or the container's end")
		}
	}
}

// key reads an object's key and its colon at i, and returns the offset of
// the value after them.
func key(data []byte, i int) (int, error) {
	if i >= len(data) || data[i] != '"' {
		return i, fail(i, "want a string key")
	}
	i, ok := scanString(data, i+1)
	if !ok {
		return i, fail(i, "invalid string")
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return i, fail(i, "want ':'")
	}
	return skipSpace(data, i+1), nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func literal(data []byte, i int, word string) bool {
	return len(data)-i >= len(word) && string(data[i:i+len(word)]) == word
}

// scanString reads a string's body from i (after its opening quote) and
// returns the offset after its closing quote.
func scanString(data []byte, i int) (int, bool) {
	for {
		for i < len(data) && plain[data[i]] {
			i++
		}
		if i >= len(data) {
			return i, false
		}
		switch data[i] {
		case '"':
			return i + 1, true
		case '\\':
			i++
			if i >= len(data) {
				return i, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(data)-i < 5 || !hex(data[i+1]) || !hex(data[i+2]) || !hex(data[i+3]) || !hex(data[i+4]) {
					return i, false
				}
				i += 5
			default:
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
}

// plain marks the bytes a string holds as they are: not a control
// character, a quote or a backslash.
var plain = func() (t [256]bool) {
	for c := ' '; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func hex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func digit(data []byte, i int) bool { return i < len(data) && '0' <= data[i] && data[i] <= '9' }

func digits(data []byte, i int) int {
	for digit(data, i) {
		i++
	}
	return i
}

// scanNumber reads a number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) (int, bool) {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case !digit(data, i):
		return i, false
	case data[i] == '0':
		i++
	default:
		i = digits(data, i)
	}
	if i < len(data) && data[i] == '.' {
		if i++; !digit(data, i) {
			return i, false
		}
		i = digits(data, i)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if !digit(data, i) {
			return i, false
		}
		i = digits(data, i)
	}
	return i, true
}
