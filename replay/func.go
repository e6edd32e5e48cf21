package replay

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// Call is what a Func script learns about one request before it answers: the
// facts a simulated provider needs to decide its timing (its age, the prompt
// size, the output cap). It is a plain value, safe for concurrent reads.
type Call struct {
	// Model is the request body's model.
	Model string
	// Attempt is the request's attempt number for its model on the handler,
	// from 1.
	Attempt int
	// Elapsed is the handler's age when the request arrived (time.Now, so
	// synctest virtual time works).
	Elapsed time.Duration
	// Time is when the request arrived.
	Time time.Time
	// PromptTokens is the prompt size as replay estimates it, the value a
	// synthetic Profile reports as usage.prompt_tokens (see PromptTokens).
	PromptTokens int
	// MaxTokens is max_completion_tokens or max_tokens; 0 if unset.
	MaxTokens int
	// Stream reports whether the request asked for a stream.
	Stream bool
	// Header is the request's header with credentials redacted, as
	// Attempt.Header logs it: for example a request id that the caller set
	// so that decide keys its random draws by the call rather than by the
	// order in which concurrent requests arrived. It is decide's own copy:
	// changing it changes nothing the Handler logs or answers.
	Header http.Header
}

// Func returns a Script that asks decide, once per request, for the Script
// that answers it: typically a *Profile built for the request's moment and
// size, optionally wrapped in WithFaults. It is how a simulator makes a fake
// provider's speed depend on its load, the prompt size or a timeline, while
// replay still writes the SSE. decide is called concurrently from every
// request's goroutine and must be safe for that; a nil result answers 500.
// A nil decide panics.
func Func(decide func(Call) Script) Script {
	if decide == nil {
		panic("replay: Func with nil decide")
	}
	return &funcScript{decide: decide}
}

type funcScript struct {
	decide func(Call) Script
}

func (*funcScript) sealed() {}

func (f *funcScript) plan(r *request) *plan {
	mt, _ := r.body.maxTokens()
	s := f.decide(Call{
		Model: r.body.Model, Attempt: r.attempt, Elapsed: r.elapsed, Time: r.start,
		PromptTokens: r.body.promptTokens(), MaxTokens: mt, Stream: r.body.Stream, Header: r.header.Clone(),
	})
	if s == nil {
		p := newStreamPlan()
		p.setStatus(500, statusBody(500, r.proto), nil)
		return p
	}
	return s.plan(r)
}

// PromptTokens returns the prompt size replay estimates for a chat-completion
// request body: 3 tokens for the reply priming plus, per message, 4 framing
// tokens and one token per 4 bytes of text, rounded up. Synthetic profiles
// report it as usage.prompt_tokens, and Func passes it as Call.PromptTokens,
// so a caller can predict what a simulated provider will see. A body that is
// not a JSON object with messages is an error.
func PromptTokens(body []byte) (int, error) {
	var c chatRequest
	if err := json.Unmarshal(body, &c); err != nil {
		return 0, errors.New("replay: the request body is not valid JSON: " + err.Error())
	}
	return c.promptTokens(), nil
}
