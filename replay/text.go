package replay

import (
	"strconv"
	"strings"
)

// Text returns the deterministic answer of n tokens that every synthetic
// Profile streams: token i (from 0) is "w{i} ", so Text(3) is "w0 w1 w2 ".
// A truncated, duplicated or stitched answer is therefore detectable by
// comparing it with Text. Text returns "" for n <= 0.
func Text(tokens int) string {
	if tokens <= 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(tokens * 5)
	for i := range tokens {
		b.WriteString(token(i))
	}
	return b.String()
}

// token returns token i of the deterministic answer.
func token(i int) string {
	return "w" + strconv.Itoa(i) + " "
}

// continuation reports how a prefill (the content of a trailing assistant
// message) relates to the deterministic answer. If prefill is a prefix of the
// deterministic text, it returns the number of tokens fully contained in it,
// the bytes of a partially contained token, and true. An empty prefill is not
// a continuation.
func continuation(prefill string) (done int, partial int, ok bool) {
	if prefill == "" {
		return 0, 0, false
	}
	rest := prefill
	for i := 0; ; i++ {
		t := token(i)
		if len(rest) < len(t) {
			if strings.HasPrefix(t, rest) {
				return i, len(rest), true
			}
			return 0, 0, false
		}
		if rest[:len(t)] != t {
			return 0, 0, false
		}
		rest = rest[len(t):]
		if rest == "" {
			return i + 1, 0, true
		}
	}
}
