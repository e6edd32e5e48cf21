package replay

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tpsroute/tpsroute/tps"
)

// chatRequest is the part of a chat-completion request body replay reads.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []chatMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
	MaxOutputTokens     *int `json:"max_output_tokens"` // the Responses API's cap

	prompt int // promptTokens' result once computed (it is at least 3)
}

// chatMessage is one request message; Content may be a string or an array of
// typed parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// text returns the message's text: the string content, or the text parts of an
// array content joined without separator.
func (m chatMessage) text() string {
	if len(m.Content) == 0 || m.Content[0] == 'n' {
		return ""
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(m.Content, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// textBytes returns the message's text like text, without a copy when the
// content is a JSON string that decodes to its own bytes: no escape and valid
// UTF-8 (json.Unmarshal would replace an invalid byte). The result must not be
// changed.
func (m chatMessage) textBytes() []byte {
	c := m.Content
	if len(c) >= 2 && c[0] == '"' && c[len(c)-1] == '"' {
		if in := c[1 : len(c)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			return in
		}
	}
	return []byte(m.text())
}

// maxTokens returns the request's output cap and whether it set one.
// max_completion_tokens wins over max_tokens.
func (c *chatRequest) maxTokens() (int, bool) {
	if c.MaxCompletionTokens != nil {
		return *c.MaxCompletionTokens, true
	}
	if c.MaxTokens != nil {
		return *c.MaxTokens, true
	}
	if c.MaxOutputTokens != nil {
		return *c.MaxOutputTokens, true
	}
	return 0, false
}

func (c *chatRequest) includeUsage() bool {
	return c.StreamOptions != nil && c.StreamOptions.IncludeUsage
}

func (c *chatRequest) lastRole() string {
	if len(c.Messages) == 0 {
		return ""
	}
	return c.Messages[len(c.Messages)-1].Role
}

// messageTokens estimates one message's prompt tokens deterministically:
// 4 framing tokens plus one token per 4 bytes of text, rounded up.
func messageTokens(m chatMessage) int {
	return 4 + (len(m.textBytes())+3)/4
}

// promptTokens estimates the prompt tokens of the whole request: the sum of
// messageTokens plus 3 for the reply priming. It is computed once per request:
// the handler, Func and a Profile each ask for it.
func (c *chatRequest) promptTokens() int {
	if c.prompt > 0 {
		return c.prompt
	}
	n := 3
	for _, m := range c.Messages {
		n += messageTokens(m)
	}
	c.prompt = n
	return n
}

// prefixHashes returns, for each i, a hash of messages[0..i] and the estimated
// tokens of that prefix.
func (c *chatRequest) prefixHashes() (hashes []uint64, tokens []int) {
	h := fnv.New64a()
	n := 0
	for _, m := range c.Messages {
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write(m.textBytes())
		h.Write([]byte{0})
		n += messageTokens(m)
		hashes = append(hashes, h.Sum64())
		tokens = append(tokens, n)
	}
	return hashes, tokens
}

// request is one parsed call as the scripts see it.
type request struct {
	body    chatRequest
	attempt int           // 1-based, per model on this handler
	elapsed time.Duration // since the handler was created
	start   time.Time     // when the request arrived
	state   *modelState   // per-model mutable state (prompt cache)
	proto   tps.Protocol  // the API the request's path names (protocolOf)
	header  http.Header   // the request's header, credentials redacted (Attempt.Header)
}
