package payload

import (
	"cmp"
	"strconv"
)

// ErrorBody is what can be read from a provider's error body, of any of the
// shapes seen in the wild (docs/STREAM_QUIRKS.md Q17, Q18, Q25): the OpenAI
// object {"error":{"message","type","code","param"}}, Gemini's array of
// such objects, a bare {"message":...} (Mistral), {"error":"text",
// "error_type":...} (TGI), a code as a number or a string, a status in
// http_status_code, status_code, status or code, and OpenRouter's upstream
// error wrapped as JSON text in the message. It is the one reader of error
// bodies: an in-stream error event (StreamError) and an HTTP error answer
// (fallback) alike. An ErrorBody is a value, safe to copy.
type ErrorBody struct {
	Message string // decoded; for a body that is not JSON, its first 300 bytes
	Code    string // the code as text, a number without its fraction ("400")
	Type    string // type, or error_type beside a text error
	Param   string
	Status  int    // an HTTP status (400-599) the body names, 0 if none
	Raw     []byte // the JSON object the fields came from, nil if none
}

// maxErrorText bounds the Message taken from a body that is not JSON.
const maxErrorText = 300

// ParseErrorBody reads body, an error of any shape ErrorBody lists. It
// never fails: what it cannot read is left empty, and a body that is not
// JSON (or nests deeper than the scanner's bound) is its own Message, cut
// to 300 bytes.
func ParseErrorBody(body []byte) ErrorBody {
	return parseErrorBody(body, 0)
}

func parseErrorBody(body []byte, depth int) ErrorBody {
	var eb ErrorBody
	s := scanner{b: body}
	s.ws()
	start := s.i
	s.skip(1)
	if !s.end() {
		if text := string(trimSpace(body)); len(text) > maxErrorText {
			eb.Message = text[:maxErrorText] + "…"
		} else {
			eb.Message = text
		}
		return eb
	}
	root := body[start:s.i]
	if root[0] == '[' { // Gemini: the first element
		a := scanner{b: root, i: 1}
		if !a.more(0, ']') {
			return eb
		}
		root = a.value()
	}
	obj := root
	if root[0] == '{' {
		m := members(root, "error", "error_type", "code")
		switch e := m[0]; {
		case len(e) > 0 && e[0] == '{':
			obj = e
		case len(e) > 0 && e[0] == '"':
			eb.Message = rawText(e)
			eb.Type = rawText(m[1])
			eb.Code = rawText(m[2])
			eb.Raw = root
			eb.Status = statusOf(root)
			return eb
		}
	}
	if obj[0] != '{' {
		eb.Message = rawText(obj)
		return eb
	}
	m := members(obj, "code", "type", "param", "message")
	eb.Raw = obj
	eb.Code, eb.Type, eb.Param, eb.Message = rawText(m[0]), rawText(m[1]), rawText(m[2]), rawText(m[3])
	eb.Status = cmp.Or(statusOf(obj), statusOf(root))
	// OpenRouter wraps the upstream error as JSON text in message (Q18).
	if msg := trimSpace([]byte(eb.Message)); depth < 4 && len(msg) > 0 && (msg[0] == '{' || msg[0] == '[') {
		inner := parseErrorBody(msg, depth+1)
		eb.Code, eb.Type = cmp.Or(eb.Code, inner.Code), cmp.Or(eb.Type, inner.Type)
		eb.Message, eb.Status = cmp.Or(inner.Message, eb.Message), cmp.Or(eb.Status, inner.Status)
	}
	return eb
}

// members returns the raw values of the given keys of obj, a JSON object
// the scanner has read; nil for an absent key, the last one for a repeated
// key.
func members(obj []byte, keys ...string) [4][]byte {
	var out [4][]byte
	s := scanner{b: obj, i: 1}
	for n := 0; s.more(n, '}'); n++ {
		k := s.key()
		v := s.value()
		for i, want := range keys {
			if string(k) == want {
				out[i] = v
			}
		}
	}
	return out
}

// rawText returns a raw value as text: a string decoded, a number or
// literal as written, "" for null; an object or array as its JSON.
func rawText(v []byte) string {
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		return string(appendUnescaped(nil, v[1:len(v)-1]))
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		if f := parseFloat(v); f == float64(int64(f)) && f >= -1e15 && f <= 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
	}
	return string(v)
}

// statusOf returns the HTTP status an error object names, in
// http_status_code, status_code, status or code (in that order of
// preference), as a number or numeric text in 400-599; 0 if none.
func statusOf(obj []byte) int {
	if len(obj) == 0 || obj[0] != '{' {
		return 0
	}
	m := members(obj, "http_status_code", "status_code", "status", "code")
	for _, v := range m {
		t := rawText(v)
		if n, err := strconv.Atoi(t); err == nil && n >= 400 && n <= 599 {
			return n
		}
	}
	return 0
}

// trimSpace returns b without JSON space at either end.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}
