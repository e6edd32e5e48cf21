package payload

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting of JSON values the scanner accepts. Deeper input
// is reported as malformed instead of recursing without limit.
const maxDepth = 256

// scanner is a single-pass, allocation-free JSON reader over one payload.
// It never writes to b. After the first syntax error bad is set and every
// method becomes a no-op, so callers check bad once at the end.
type scanner struct {
	b   []byte
	i   int
	bad bool
	// skipped, when not nil, gathers the bounds of each string and number
	// value skip consumes, for a template to learn (template.begin).
	skipped *[]span
}

func (s *scanner) fail() {
	s.bad = true
	s.i = len(s.b)
}

func (s *scanner) ws() {
	b, i := s.b, s.i
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	s.i = i
}

// end reports whether the payload was one well-formed value with nothing
// but space after it: the check every parser makes last. Trailing bytes
// count as an error (peek reads a NUL byte as the end, so they must be
// looked for here).
func (s *scanner) end() bool {
	if s.ws(); s.i < len(s.b) {
		s.fail()
	}
	return !s.bad
}

// peek returns the next non-space byte without consuming it, or 0 at the end.
// The hottest callers (str, key, more) test the compact-JSON case (no space
// to skip) themselves with cur, which is inlined, and call peek only after a
// space or at the end.
func (s *scanner) peek() byte {
	if c := s.cur(); c > ' ' {
		return c
	}
	s.ws()
	return s.cur()
}

// cur returns the byte at the read position without skipping space, or 0 at
// the end.
func (s *scanner) cur() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// literal consumes lit if it is next, and fails otherwise.
func (s *scanner) literal(lit string) {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		s.fail()
		return
	}
	s.i += len(lit)
}

// null consumes a null literal if it is next and reports whether it did.
func (s *scanner) null() bool {
	if s.peek() == 'n' {
		s.literal("null")
		return !s.bad
	}
	return false
}

// open consumes the opening byte of an object or array. It returns false
// (having consumed it) for null, and fails for anything else.
func (s *scanner) open(c byte) bool {
	switch s.peek() {
	case c:
		s.i++
		return true
	case 'n':
		s.literal("null")
		return false
	default:
		s.fail()
		return false
	}
}

// more reports whether another member or element follows inside an object
// or array whose opening byte was consumed; n is how many came before.
// It consumes the separating comma or the closing byte end.
func (s *scanner) more(n int, end byte) bool {
	c := s.cur()
	if c <= ' ' {
		c = s.peek()
	}
	if c == end {
		s.i++
		return false
	}
	if n > 0 {
		if c != ',' {
			s.fail()
			return false
		}
		s.i++
		s.ws()
	}
	if s.i >= len(s.b) {
		s.fail()
		return false
	}
	return true
}

// key reads an object key and the colon after it.
func (s *scanner) key() []byte {
	k := s.str()
	if s.cur() != ':' && s.peek() != ':' {
		s.fail()
		return nil
	}
	s.i++
	return k
}

// str reads a string and returns its raw bytes between the quotes, escapes
// left in place. It validates escapes and rejects control characters.
func (s *scanner) str() []byte {
	if s.cur() != '"' && s.peek() != '"' {
		s.fail()
		return nil
	}
	b := s.b
	start := s.i + 1
	i := start
	for {
		i = nextSpecial(b, i)
		if i >= len(b) {
			s.fail()
			return nil
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return b[start:i]
		case '\\':
			if i+1 >= len(b) {
				s.fail()
				return nil
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					s.fail()
					return nil
				}
				for _, h := range b[i+2 : i+6] {
					if hexVal(h) < 0 {
						s.fail()
						return nil
					}
				}
				i += 6
			default:
				s.fail()
				return nil
			}
		default: // control character
			s.fail()
			return nil
		}
	}
}

// nextSpecial returns the index of the first quote, backslash or control
// character in b at or after i, or len(b). It tests 8 bytes at a time with
// the exact SWAR "has zero byte" and "has byte less than" tests, whose lowest
// set bit marks the first such byte (a borrow can only mark bytes above it).
func nextSpecial(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ (ones * '"')
		bs := x ^ (ones * '\\')
		if m := ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(b) && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20 {
		i++
	}
	return i
}

// num reads a number per the JSON grammar and returns its raw bytes.
func (s *scanner) num() []byte {
	s.ws()
	start := s.i
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		s.fail()
		return nil
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			s.fail()
			return nil
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			s.fail()
			return nil
		}
	}
	return s.b[start:s.i]
}

func (s *scanner) digits() int {
	b, i := s.b, s.i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - s.i
	s.i = i
	return n
}

// skip consumes one value of any type.
func (s *scanner) skip(depth int) {
	if depth > maxDepth {
		s.fail()
		return
	}
	switch s.peek() {
	case '{':
		s.i++
		for n := 0; s.more(n, '}'); n++ {
			s.key()
			s.skip(depth + 1)
		}
	case '[':
		s.i++
		for n := 0; s.more(n, ']'); n++ {
			s.skip(depth + 1)
		}
	case '"':
		at := s.i
		s.str()
		s.noteSkipped(at)
	case 't':
		s.literal("true")
	case 'f':
		s.literal("false")
	case 'n':
		s.literal("null")
	default:
		at := s.i
		s.num()
		s.noteSkipped(at)
	}
}

// noteSkipped records the value skip consumed from at, when a template
// is learning.
func (s *scanner) noteSkipped(at int) {
	if s.skipped != nil && !s.bad {
		*s.skipped = append(*s.skipped, span{int32(at), int32(s.i)})
	}
}

// int reads a number, or null as 0, and returns it as an int64. Fractions are
// truncated and out-of-range values saturate. Other value types are skipped
// and read as 0.
func (s *scanner) int() int64 {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		s.skip(1)
		return 0
	}
	raw := s.num()
	for _, c := range raw {
		if c == '.' || c == 'e' || c == 'E' {
			f := parseFloat(raw)
			switch {
			case f >= 9.2e18:
				return 1<<63 - 1
			case f <= -9.2e18:
				return -1 << 63
			}
			return int64(f)
		}
	}
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	var v int64
	for _, c := range raw {
		d := int64(c - '0')
		if v > (1<<63-1-d)/10 {
			v = 1<<63 - 1
			break
		}
		v = v*10 + d
	}
	if neg {
		return -v
	}
	return v
}

// float reads a number, or null as 0. Other value types are skipped and read
// as 0.
func (s *scanner) float() float64 {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		s.skip(1)
		return 0
	}
	return parseFloat(s.num())
}

// parseFloat converts a number already validated by num. The conversion of
// raw to a string does not escape, so it does not allocate.
func parseFloat(raw []byte) float64 {
	f, _ := strconv.ParseFloat(string(raw), 64) // ±Inf when out of range
	return f
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// appendUnescaped appends the text of a raw JSON string body (as returned by
// scanner.str) to dst, decoding escapes. Invalid surrogates become U+FFFD, as
// encoding/json does; a malformed escape (an unknown letter, a \u without
// four hex digits, a final backslash) is kept as it is. dst may be raw[:0]:
// it never writes ahead of what it has read (route's credential scrubber
// decodes in place).
//
// Its complexity (about 23) is one case per JSON escape, surrogate pairs
// included.
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				return append(dst, raw[i:]...)
			}
			dst = append(dst, raw[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(raw) {
			return append(dst, c)
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, i+2)
			if !ok {
				dst = append(dst, c)
				i++
				continue
			}
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if r2, ok := hex4(raw, i+2); ok && r2 >= 0xDC00 && r2 < 0xE000 {
						dst = utf8.AppendRune(dst, (r-0xD800)<<10+(r2-0xDC00)+0x10000)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			} else if r >= 0xDC00 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		case '"', '\\', '/':
			dst = append(dst, raw[i+1])
		default:
			dst = append(dst, c)
			i++
			continue
		}
		i += 2
	}
	return dst
}

func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, h := range raw[at : at+4] {
		v := hexVal(h)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}
