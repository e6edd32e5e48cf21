package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/route"
)

// DefaultBuild builds a POST to d.BaseURL with "chat/completions" joined to
// its path (net/url's JoinPath; a query such as Azure's "?api-version=..."
// is kept), with body's "model" set to d.WireModel(), and, when the body
// streams, "stream_options.include_usage" set unless d declares
// Capabilities.NoStreamOptions; "Accept: text/event-stream" for a stream,
// "application/json" for a plain call; "Authorization: Bearer d.APIKey" (when not
// empty) and d.Headers. It reads nothing but d, so no credential or routing
// header of one deployment can reach another. A BaseURL with user info is an
// error, never sent without it.
func DefaultBuild(ctx context.Context, d route.Deployment, body []byte) (*http.Request, error) {
	u, err := chatURL(d)
	if err != nil {
		return nil, err
	}
	b, stream, err := attemptWire(body, d.WireModel(), !d.Capabilities.NoStreamOptions)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if d.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+d.APIKey)
	}
	for k, v := range d.Headers {
		req.Header.Set(k, v)
	}
	return req, nil
}

// attemptWire returns body as one deployment receives it: "model" set to
// wire and, when the body streams and usage is true,
// "stream_options.include_usage" set to true; and whether it streams. body
// is not modified. It reads body in place (GetBytes would copy each value's
// text), in one pass over its members. The common body, whose "model" is
// there and whose "stream_options" needs no edit, is written into one new
// slice: the part before the model, the wire model, the rest with the
// usage option before the closing brace. Any other shape goes through
// sjson, a pass and a copy of the whole body per field (with a 100 KiB
// prompt, sjson's two copies and gjson's scans took 130–162 µs an attempt,
// this 49–67 µs; BenchmarkAttemptWire).
func attemptWire(body []byte, wire string, usage bool) (b []byte, stream bool, err error) {
	// One pass over the top-level members; the first of a repeated key
	// counts, as for gjson.Get.
	var m, st, opts gjson.Result
	gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body))).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "model" && !m.Exists():
			m = v
		case k.Str == "stream" && !st.Exists():
			st = v
		case k.Str == "stream_options" && !opts.Exists():
			opts = v
		}
		return true
	})
	stream = st.Type == gjson.True
	usage = usage && stream && !opts.Get("include_usage").Bool()
	rest := bytes.TrimRight(body[min(m.Index+len(m.Raw), len(body)):], " \t\r\n")
	if m.Index > 0 && len(rest) > 0 && rest[len(rest)-1] == '}' && !(usage && opts.Exists()) {
		b = make([]byte, 0, len(body)+len(wire)+2+len(usageOption))
		b = payload.AppendQuoted(append(b, body[:m.Index]...), wire)
		if usage {
			b = append(append(b, rest[:len(rest)-1]...), usageOption...)
			return append(b, body[m.Index+len(m.Raw)+len(rest)-1:]...), stream, nil
		}
		return append(b, body[m.Index+len(m.Raw):]...), stream, nil
	}
	if b, err = sjson.SetBytes(body, "model", wire); err != nil {
		return nil, false, err
	}
	if usage {
		b, err = sjson.SetBytes(b, "stream_options.include_usage", true)
	}
	return b, stream, err
}

// usageOption is what attemptWire adds before a body's closing brace.
const usageOption = `,"stream_options":{"include_usage":true}`

// chatURL returns d's chat-completions URL. route.Deployment.Validate is the
// home of the BaseURL rule (tpsroute.New applies it); user info, which the
// transport would drop without a word, is refused here too for a Deployment
// that bypassed it.
func chatURL(d route.Deployment) (string, error) {
	u, err := url.Parse(d.BaseURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue would quote the URL, password and all
		}
		return "", fmt.Errorf("fallback: BaseURL: %w", err)
	}
	if u.User != nil {
		return "", errors.New("fallback: BaseURL has user info, which route.Deployment.Validate refuses")
	}
	return u.JoinPath("chat/completions").String(), nil
}

// DefaultPrefill appends {"role":"assistant","content":text,"prefix":true} to
// the body's messages: the shape DeepSeek and Mistral accept for assistant
// prefill, and a final assistant message that vLLM, SGLang and Anthropic-style
// servers continue. A deployment that needs another shape (for example vLLM's
// "continue_final_message") gets it from fallback.Options.Prefill.
func DefaultPrefill(body []byte, text string) ([]byte, error) {
	msg := map[string]any{"role": "assistant", "content": text, "prefix": true}
	return sjson.SetBytes(body, "messages.-1", msg)
}

// MessagesPrefill is DefaultPrefill for the Anthropic Messages API
// (tps.ProtocolMessages), which continues a final assistant message
// natively: it appends text to the body's final assistant message, after
// the caller's own prefill (to its string content, to its last block when
// that is a text block, else as a new text block), or appends
// {"role":"assistant","content":text} when the last message is not the
// assistant's. The text is then exactly what the model wrote after the
// caller's prefill. Empty text leaves body as it is. Anthropic refuses a
// final assistant content that ends in whitespace: the Executor passes text
// without its trailing whitespace and splices the continuation so that the
// caller never reads that whitespace twice (docs/STREAM_QUIRKS.md Q37). A
// body without a "messages" array is an error. It does not modify body.
func MessagesPrefill(body []byte, text string) ([]byte, error) {
	msgs := gjson.GetBytes(body, "messages")
	if !msgs.IsArray() {
		return nil, errors.New("fallback: Messages prefill: the body has no messages array")
	}
	if text == "" {
		return body, nil
	}
	n := int(msgs.Get("#").Int())
	last := msgs.Get(strconv.Itoa(n - 1))
	if n == 0 || last.Get("role").String() != "assistant" {
		return sjson.SetBytes(body, "messages.-1", map[string]any{"role": "assistant", "content": text})
	}
	at := "messages." + strconv.Itoa(n-1) + ".content"
	content := last.Get("content")
	switch {
	case content.Type == gjson.String:
		return sjson.SetBytes(body, at, content.Str+text)
	case content.IsArray():
		m := int(content.Get("#").Int())
		if part := content.Get(strconv.Itoa(m - 1)); m > 0 && part.Get("type").String() == "text" {
			return sjson.SetBytes(body, at+"."+strconv.Itoa(m-1)+".text", part.Get("text").String()+text)
		}
		return sjson.SetBytes(body, at+".-1", map[string]any{"type": "text", "text": text})
	}
	return sjson.SetBytes(body, at, text)
}

// streamBody returns body with "stream": true, copying only when needed.
func streamBody(body []byte) ([]byte, error) {
	if gjson.GetBytes(body, "stream").Type == gjson.True {
		return body, nil
	}
	return sjson.SetBytes(body, "stream", true)
}
