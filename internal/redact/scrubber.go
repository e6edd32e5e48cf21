package redact

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/route"
)

// minSecretLen is the shortest value Scrubber replaces: shorter values are not
// credentials and replacing them would mangle the message.
const minSecretLen = 4

// Scrubber replaces the credentials of a set of deployments (API keys and
// credential header values of 4 bytes or more) in bytes that may echo them:
// a provider's error, a header, a stream event. It finds a credential in the
// forms a JSON or HTTP reader would turn back into it: raw, inside JSON
// string escapes (\uXXXX for any character, \/), percent-encoded, and those
// nested in one another up to four levels. A credential transformed in any
// other way (base64, split across two stream events, reversed) is not found;
// docs/SECURITY.md says why that is the limit.
//
// The zero value and a nil *Scrubber replace nothing. A Scrubber is safe for
// concurrent use.
type Scrubber struct {
	secrets [][]byte // longest first
	r       *strings.Replacer
	// risky: a secret holds a byte that a one-letter JSON escape (\" \\ \n
	// ...) produces, so any backslash may hide part of it.
	risky bool
}

// NewScrubber returns a Scrubber for the credentials of ds: each API key and
// each credential header value (IsCredentialName).
func NewScrubber(ds ...route.Deployment) *Scrubber {
	var secrets []string
	for _, d := range ds {
		secrets = append(secrets, d.APIKey)
		for k, v := range d.Headers {
			if route.IsCredentialName(k) {
				secrets = append(secrets, v)
			}
		}
	}
	return newScrubber(secrets)
}

// RequestScrubber returns a Scrubber for the credentials req carries, for
// code that relays or records what answers it without knowing the
// deployment (replay's Recorder): each credential header's value (see
// route.IsCredentialName), also without its scheme ("Bearer sk-1" gives "sk-1";
// a "Basic" value gives its decoded user and password too), each credential
// query parameter's value and the URL's password. A nil req gives a Scrubber
// that replaces nothing.
func RequestScrubber(req *http.Request) *Scrubber {
	if req == nil {
		return &Scrubber{}
	}
	var secrets []string
	for k, vs := range req.Header {
		if !route.IsCredentialName(k) {
			continue
		}
		for _, v := range vs {
			secrets = append(secrets, v)
			scheme, cred, ok := strings.Cut(v, " ")
			if !ok {
				continue
			}
			cred = strings.TrimSpace(cred)
			secrets = append(secrets, cred)
			if strings.EqualFold(scheme, "Basic") {
				if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
					user, pass, _ := strings.Cut(string(dec), ":")
					secrets = append(secrets, string(dec), user, pass)
				}
			}
		}
	}
	if u := req.URL; u != nil {
		if pass, ok := u.User.Password(); ok {
			secrets = append(secrets, pass)
		}
		for k, vs := range u.Query() {
			if route.IsCredentialName(k) {
				secrets = append(secrets, vs...)
			}
		}
	}
	return newScrubber(secrets)
}

// newScrubber returns a Scrubber for secrets, ignoring those shorter than
// minSecretLen.
func newScrubber(secrets []string) *Scrubber {
	secrets = slices.DeleteFunc(secrets, func(v string) bool { return len(v) < minSecretLen })
	// Longest first, so that a key containing another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	secrets = slices.Compact(secrets)
	if len(secrets) == 0 {
		return &Scrubber{}
	}
	s := &Scrubber{secrets: make([][]byte, len(secrets))}
	pairs := make([]string, 0, 2*len(secrets))
	for i, v := range secrets {
		s.secrets[i] = []byte(v)
		pairs = append(pairs, v, route.Redacted)
		s.risky = s.risky || strings.ContainsFunc(v, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 })
	}
	s.r = strings.NewReplacer(pairs...)
	return s
}

// Contains reports whether b holds a credential in any form the Scrubber
// finds. Without a backslash escape or a '%' in b it costs one substring
// search per credential and allocates nothing.
func (s *Scrubber) Contains(b []byte) bool {
	if s == nil || len(s.secrets) == 0 {
		return false
	}
	if s.hasRaw(b) {
		return true
	}
	if !s.mayHide(b) {
		return false
	}
	var stack [512]byte // decoding an ordinary event allocates nothing
	return s.hidden(b, stack[:0])
}

// hidden reports whether decoding b (see decode), up to maxDecodeRounds
// times, brings a credential out. scratch is the space to decode into; after
// the first round each round decodes in place, which is safe because
// decoding never writes ahead of what it has read.
func (s *Scrubber) hidden(b, scratch []byte) bool {
	for range maxDecodeRounds {
		d := unpercent(payload.AppendUnescaped(scratch[:0], b))
		if len(d) == len(b) { // nothing decoded: a fixed point
			return false
		}
		if s.hasRaw(d) {
			return true
		}
		if !s.mayHide(d) {
			return false
		}
		b, scratch = d, d
	}
	return false
}

// Scrub returns str with every credential replaced by route.Redacted. A credential
// found only in an encoded form is replaced in the decoded text: the result
// is then the text with its escapes decoded, which reads the same to a
// person and holds no escape that would bring the credential back. Text so
// deeply encoded that the credential still hides in it after
// maxDecodeRounds reads route.Redacted whole. Contains is false for the result.
func (s *Scrubber) Scrub(str string) string {
	if s == nil || s.r == nil {
		return str
	}
	str = s.r.Replace(str)
	b := []byte(str)
	for range maxDecodeRounds {
		if !s.mayHide(b) {
			break
		}
		d := decode(b)
		if len(d) == len(b) {
			break
		}
		if s.hasRaw(d) { // scrub at this depth, then look deeper
			str = s.r.Replace(string(d))
			d = []byte(str)
		}
		b = d
	}
	if s.Contains([]byte(str)) {
		return route.Redacted
	}
	return str
}

// ScrubJSON returns b with every credential replaced, keeping JSON valid: a
// string (member name or value) that holds a credential in any form is
// decoded, scrubbed and encoded again, and a credential outside strings is
// replaced raw. b itself is returned, not a copy, when it holds none. b need
// not be valid JSON: an SSE comment or a plain-text body is scrubbed too.
func (s *Scrubber) ScrubJSON(b []byte) []byte {
	if !s.Contains(b) {
		return b
	}
	out := make([]byte, 0, len(b))
	last := 0
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		j, closed := stringEnd(b, i)
		if tok := b[i:j]; s.Contains(tok) {
			inner := tok[1:]
			if closed {
				inner = tok[1 : len(tok)-1]
			}
			out = append(out, b[last:i]...)
			out = payload.AppendQuoted(out, s.Scrub(string(payload.AppendUnescaped(nil, inner))))
			last = j
		}
		i = j - 1
	}
	out = append(out, b[last:]...)
	out = []byte(s.r.Replace(string(out)))
	if s.Contains(out) { // encoded outside any string: not JSON anyway
		return []byte(s.Scrub(string(out)))
	}
	return out
}

// maxDecodeRounds bounds how deeply nested encodings are followed.
const maxDecodeRounds = 4

func (s *Scrubber) hasRaw(b []byte) bool {
	for _, sec := range s.secrets {
		if bytes.Contains(b, sec) {
			return true
		}
	}
	return false
}

// mayHide reports whether b has an escape that could decode to part of a
// credential: \u, \/ or %, or any backslash for a risky credential. Nested
// encodings need one of these too: \\u0073 holds "\u", %5C%75 holds "%".
func (s *Scrubber) mayHide(b []byte) bool {
	if bytes.IndexByte(b, '%') >= 0 {
		return true
	}
	if s.risky {
		return bytes.IndexByte(b, '\\') >= 0
	}
	return bytes.Contains(b, []byte(`\u`)) || bytes.Contains(b, []byte(`\/`))
}

// decode returns b with one round of JSON string escapes and then one round
// of percent-encoding decoded. It never returns a longer slice, and returns
// one of the same length only when nothing was decoded.
func decode(b []byte) []byte {
	return unpercent(payload.AppendUnescaped(make([]byte, 0, len(b)), b))
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unpercent decodes %XX in place and returns the shortened b.
func unpercent(b []byte) []byte {
	i := bytes.IndexByte(b, '%')
	if i < 0 {
		return b
	}
	j := i
	for ; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			hi, ok1 := unhex(b[i+1])
			lo, ok2 := unhex(b[i+2])
			if ok1 && ok2 {
				b[j] = hi<<4 | lo
				j++
				i += 2
				continue
			}
		}
		b[j] = b[i]
		j++
	}
	return b[:j]
}

// stringEnd returns the index just after the JSON string that opens at
// b[i] (a '"') and true, or len(b) and false when it is not closed.
func stringEnd(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return len(b), false
}
