package bench

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// Message is one chat message of a Prompt. It is a plain value, safe for
// concurrent reads.
type Message struct {
	Role    string `json:"role"`    // "system", "user" or "assistant"
	Content string `json:"content"` // plain text
}

// Prompt is one request of a workload: its messages and, optionally, an
// output cap. A Prompt must not be modified once handed to Run; it is then
// safe for concurrent reads.
type Prompt struct {
	Messages []Message `json:"messages"`
	// MaxTokens caps the answer, in tokens; 0 means the Workload's MaxTokens.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// PromptError is a bad line of a JSONL prompt file. It is immutable and safe
// for concurrent use.
type PromptError struct {
	Line int    // 1-based line number
	Msg  string // what is wrong
}

// Error returns "bench: prompts line L: msg".
func (e *PromptError) Error() string {
	return "bench: prompts line " + strconv.Itoa(e.Line) + ": " + e.Msg
}

// LoadPrompts reads prompts from JSONL: one JSON object per line, either
// {"messages":[{"role":...,"content":...}, ...]} or {"prompt":"..."} (one
// user message), each with an optional "max_tokens". Blank lines and lines
// starting with "#" are skipped. Unknown fields are errors, reported as a
// *PromptError with the line; so is a file without any prompt.
func LoadPrompts(r io.Reader) ([]Prompt, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	var out []Prompt
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var raw struct {
			Messages  []Message `json:"messages"`
			Prompt    *string   `json:"prompt"`
			MaxTokens int       `json:"max_tokens"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&raw); err != nil {
			return nil, &PromptError{Line: line, Msg: err.Error()}
		}
		p := Prompt{Messages: raw.Messages, MaxTokens: raw.MaxTokens}
		switch {
		case raw.Prompt != nil && len(raw.Messages) > 0:
			return nil, &PromptError{Line: line, Msg: `both "prompt" and "messages"`}
		case raw.Prompt != nil:
			p.Messages = []Message{{Role: "user", Content: *raw.Prompt}}
		case len(raw.Messages) == 0:
			return nil, &PromptError{Line: line, Msg: `needs "messages" or "prompt"`}
		}
		for i, m := range p.Messages {
			switch m.Role {
			case "system", "user", "assistant", "developer":
			default:
				return nil, &PromptError{Line: line, Msg: fmt.Sprintf("messages[%d]: unknown role %q", i, m.Role)}
			}
		}
		if p.MaxTokens < 0 {
			return nil, &PromptError{Line: line, Msg: "max_tokens is negative"}
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: reading prompts: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("bench: prompts: no prompt in the file")
	}
	return out, nil
}

// CacheMode says how a run treats the providers' prompt (prefix) caches. It is
// a constant, safe for concurrent use.
type CacheMode uint8

const (
	// Cold gives every request a unique nonce at the very start of its first
	// message, so no provider can serve any of its prefix from cache.
	Cold CacheMode = iota
	// Warm gives every request of a run the same prefix (the system prompt,
	// or DefaultWarmPrefix tokens when the workload has none) and sends one
	// priming request per target before the warmup, so the prefix is cached
	// when measurement starts.
	Warm
)

// String returns "cold" or "warm".
func (c CacheMode) String() string {
	if c == Warm {
		return "warm"
	}
	return "cold"
}

// ParseCacheModes parses "cold", "warm" or "both" (cold then warm).
func ParseCacheModes(s string) ([]CacheMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "cold":
		return []CacheMode{Cold}, nil
	case "warm":
		return []CacheMode{Warm}, nil
	case "both":
		return []CacheMode{Cold, Warm}, nil
	}
	return nil, fmt.Errorf("bench: cache mode %q: want cold, warm or both", s)
}

// DefaultInputTokens is the synthetic user-prompt length used when a Workload
// has neither Prompts nor InputTokens.
const DefaultInputTokens = 256

// DefaultWarmPrefix is the length, in tokens, of the shared prefix a Warm run
// adds when the Workload has no system prompt: above the 1,024 tokens some
// providers need before they cache a prefix.
const DefaultWarmPrefix = 1200

// Workload is what a run sends: recorded or synthetic prompts, an optional
// system prompt and an output cap. The zero Workload sends synthetic user
// prompts of DefaultInputTokens tokens with the provider's default output
// length. A Workload is a value; it is safe for concurrent reads.
type Workload struct {
	// Model is the logical model requested, as in the config's deployments.
	// Empty means the model of the first deployment.
	Model string
	// Prompts, when not empty, are sent in order, cycling; InputTokens is then
	// ignored. Load them with LoadPrompts.
	Prompts []Prompt
	// InputTokens are the lengths, in tokens, of synthetic user prompts,
	// cycled through request by request. Empty means DefaultInputTokens.
	// Synthetic text is drawn from a fixed vocabulary of short English words,
	// about one token per word with common tokenizers.
	InputTokens []int
	// SystemTokens is the length, in tokens, of a synthetic system prompt
	// prepended to every request (KV-cache pressure). Zero means none.
	SystemTokens int
	// MaxTokens caps each answer, in tokens, unless the prompt sets its own.
	// Zero means no cap (the provider's default length).
	MaxTokens int
	// Seed makes the synthetic text reproducible: the same Seed gives the
	// same prompts. Zero is a valid seed.
	Seed uint64
}

// vocabulary holds short common words: about one BPE token each.
const vocabulary = "the of and to in is for on that by with as at from it was be this are or " +
	"an which not but have one all new more can time about two first when other into were some would " +
	"river stone light cloud market garden signal paper engine window north south green water table " +
	"music letter city road house"

// Words returns n space-separated words drawn deterministically from the
// source seeded with seed and stream: about n tokens. It returns "" for
// n <= 0.
func Words(n int, seed, stream uint64) string {
	if n <= 0 {
		return ""
	}
	words := strings.Fields(vocabulary)
	r := rand.New(rand.NewPCG(seed, stream))
	var b strings.Builder
	b.Grow(n * 6)
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// build returns request i (0-based) of a run in cache mode cm. nonce makes a
// cold request's prefix unique and a warm run's shared prefix specific to
// the run; it never repeats across runs that use distinct nonces.
func (w *Workload) build(i int, cm CacheMode, nonce string) Prompt {
	var p Prompt
	if len(w.Prompts) > 0 {
		src := w.Prompts[i%len(w.Prompts)]
		p.MaxTokens = src.MaxTokens
		p.Messages = append(p.Messages, src.Messages...)
	} else {
		sizes := w.InputTokens
		if len(sizes) == 0 {
			sizes = []int{DefaultInputTokens}
		}
		n := sizes[i%len(sizes)]
		p.Messages = []Message{{Role: "user", Content: Words(n, w.Seed, uint64(i)+1)}}
	}
	p.MaxTokens = cmp.Or(p.MaxTokens, w.MaxTokens)
	system := ""
	if w.SystemTokens > 0 {
		system = Words(w.SystemTokens, w.Seed, 0)
	} else if cm == Warm {
		system = Words(DefaultWarmPrefix, w.Seed, 0)
	}
	var head string
	switch cm {
	case Cold:
		head = "[request " + nonce + "-" + strconv.Itoa(i) + "] "
	case Warm:
		head = "[session " + nonce + "] "
	}
	if system != "" {
		p.Messages = append([]Message{{Role: "system", Content: head + system}}, p.Messages...)
		return p
	}
	// No system prompt: the nonce goes first in the first message (p's own
	// copy of the messages).
	p.Messages[0].Content = head + p.Messages[0].Content
	return p
}

// appendBody appends the JSON body of a streaming chat completion for p.
func appendBody(b []byte, model string, p *Prompt) []byte {
	b = append(b, `{"model":`...)
	b = strconv.AppendQuote(b, model)
	b = append(b, `,"stream":true`...)
	if p.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(p.MaxTokens), 10)
	}
	b = append(b, `,"messages":[`...)
	for i, m := range p.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = payload.AppendQuoted(b, m.Role)
		b = append(b, `,"content":`...)
		b = payload.AppendQuoted(b, m.Content)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// Body returns the JSON body of request i (0-based) of a run of w in cache
// mode cm, exactly as Run sends it: a streaming chat completion for w.Model
// with the request's messages and output cap. nonce makes a cold request's
// prefix unique and a warm run's shared prefix specific to the run. It is
// what other harnesses built on this package (the fleet simulator) send, so
// a workload means the same everywhere.
func (w *Workload) Body(i int, cm CacheMode, nonce string) []byte {
	p := w.build(i, cm, nonce)
	return appendBody(make([]byte, 0, 512), w.Model, &p)
}
