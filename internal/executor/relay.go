package executor

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/tpsroute/tpsroute/internal/redact"
	"github.com/tpsroute/tpsroute/route"
)

// This file is where an upstream's bytes leave the package: the headers a
// Result and an error carry, and the stream events a Result's Body releases.
// Each passes the deployment's redact.Scrubber here and nowhere else, so no
// door (the Client, Do, the Transport, the gateway) can relay a credential
// the upstream echoed (docs/SECURITY.md).

// scrubber is a deployment's redact.Scrubber with the API key it was made
// for.
type scrubber struct {
	key string
	sc  *redact.Scrubber
}

// scrubberFor returns the Scrubber of d's credentials, made once per key
// state and again only when d's API key changed (a caller that rotates
// keys in the deployments it plans). Credential headers are read with it.
func (st *keyState) scrubberFor(d *route.Deployment) *redact.Scrubber {
	if s := st.scrub.Load(); s != nil && s.key == d.APIKey {
		return s.sc
	}
	s := &scrubber{key: d.APIKey, sc: redact.NewScrubber(*d)}
	st.scrub.Store(s)
	return s.sc
}

// relayedHeaders are the upstream response headers a Result or an error
// carries, by canonical name; every other header is dropped. relayedPrefixes
// admits the rate-limit families.
var relayedHeaders = map[string]bool{
	"Content-Type":         true,
	"X-Request-Id":         true,
	"Request-Id":           true,
	"Openai-Processing-Ms": true,
	"Openai-Version":       true,
	"Retry-After":          true,
	"Retry-After-Ms":       true,
	"X-Ms-Retry-After-Ms":  true,
	"X-Should-Retry":       true,
}

var relayedPrefixes = [...]string{"X-Ratelimit-", "Anthropic-Ratelimit-"}

// maxRelayedHeader bounds one relayed header value in bytes; a longer one is
// dropped. Request ids and rate-limit values are short.
const maxRelayedHeader = 512

// relayHeader returns the headers of h that may reach a caller: the
// allow-listed ones (relayedHeaders, relayedPrefixes), one value each of at
// most maxRelayedHeader bytes, with a value that holds a credential of sc in
// any form reading route.Redacted.
func relayHeader(h http.Header, sc *redact.Scrubber) http.Header {
	out := make(http.Header, 4)
	for k, vs := range h {
		if len(vs) == 0 || len(vs[0]) > maxRelayedHeader || !relayed(k) {
			continue
		}
		if sc.Contains([]byte(vs[0])) {
			out[k] = []string{route.Redacted}
			continue
		}
		out[k] = vs[:1:1] // shares h's array; an append copies
	}
	return out
}

// relayed reports whether the canonical header name k is relayed.
func relayed(k string) bool {
	if relayedHeaders[k] {
		return true
	}
	for _, p := range relayedPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// scrubEvents returns b, whole SSE events, with every credential of sc
// removed, and whether it changed anything. It returns b itself when b holds
// none, which costs a substring
// search per credential (redact.Scrubber.Contains). Otherwise, line by line:
// a data line keeps its JSON with the strings that held a credential reading
// route.Redacted (redact.Scrubber.ScrubJSON); any other line that holds one
// (a comment, an id, an event name, an unknown field) is dropped. Line ends
// (LF, CR, CRLF) are kept as they were.
func scrubEvents(sc *redact.Scrubber, b []byte) ([]byte, bool) {
	if !sc.Contains(b) {
		return b, false
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line, end := b, len(b)
		if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
			end = i + 1
			if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
				end++
			}
			line = b[:i]
		}
		eol := b[len(line):end]
		b = b[end:]
		if !sc.Contains(line) {
			out = append(append(out, line...), eol...)
			continue
		}
		value, isData := bytes.CutPrefix(line, []byte("data:"))
		if !isData {
			continue // a comment, id, event or unknown field: dropped
		}
		out = append(out, "data:"...)
		out = append(append(out, sc.ScrubJSON(value)...), eol...)
	}
	return out, true
}

// scrub replaces the credentials of sc in every field of pe, in any form
// (redact.Scrubber), so that neither the error's message nor the
// *openai.Error decoded from Raw (Message, Type, Param, Code, RawJSON)
// repeats a key the provider echoed: Raw is scrubbed string by string before
// anything decodes it.
func (pe *providerError) scrub(sc *redact.Scrubber) {
	pe.Code, pe.Type = sc.Scrub(pe.Code), sc.Scrub(pe.Type)
	pe.Message, pe.Param = sc.Scrub(pe.Message), sc.Scrub(pe.Param)
	pe.Raw = string(sc.ScrubJSON([]byte(pe.Raw)))
}

// loneCRToLF makes every lone CR line end in b (a CR not followed by LF) an
// LF, in place, so that readers that split lines at LF only (openai-go's
// decoder, most SSE clients) read the events the Tap framed: the SSE
// specification allows lone-CR line ends, and they reach the caller
// otherwise as one unending line (docs/STREAM_QUIRKS.md Q4). CRLF and LF are
// left as they are, and the length never changes. A CR that ends b is
// taken as lone: b is whole events, so an LF after it would only open the
// next block as a stray blank line.
func loneCRToLF(b []byte) {
	i := bytes.IndexByte(b, '\r')
	if i < 0 {
		return
	}
	for ; i < len(b); i++ {
		if b[i] == '\r' && (i+1 == len(b) || b[i+1] != '\n') {
			b[i] = '\n'
		}
	}
}
