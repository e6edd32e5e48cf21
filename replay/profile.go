package replay

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/tps"
)

// Style is the provider dialect a synthetic Profile streams in. The zero
// Style is OpenAI. Each style follows a shape in docs/STREAM_QUIRKS.md. It
// is a value, safe for concurrent use.
type Style uint8

const (
	// OpenAI: a role chunk with content "", one chunk per delta with
	// "usage":null, a finish chunk with an empty delta, a usage chunk with
	// "choices":[] when include_usage is set, then [DONE].
	OpenAI Style = iota
	// VLLM: no usage key on ordinary chunks, finish_reason on the last text
	// chunk with stop_reason, a usage chunk when include_usage is set, [DONE].
	VLLM
	// UsageTwice (Groq): usage and x_groq.usage on the finish chunk always,
	// and again in a usage chunk when include_usage is set.
	UsageTwice
	// Annotations (Azure): a prompt_filter_results chunk with id "",
	// created 0 and choices [] first, content_filter_results on every content
	// chunk, and an asynchronous filter chunk without delta after the finish.
	Annotations
	// ProcessingComments (OpenRouter): ": OPENROUTER PROCESSING" comments
	// while waiting for the first token, and the usage chunk after the finish
	// chunk carrying choices [{delta:{role,content:""},finish_reason:null}].
	ProcessingComments
	// KeepAlives (DeepSeek): ": keep-alive" comments while waiting for the
	// first token, usage with prompt_cache_hit_tokens and
	// prompt_cache_miss_tokens on the finish chunk.
	KeepAlives
	// ReasoningFirst (DeepSeek-reasoner): reasoning_content deltas (tokens
	// "r{i} ") before the content deltas; reasoning tokens are counted in
	// completion_tokens_details.reasoning_tokens.
	ReasoningFirst
	// Responses is OpenAI's Responses API stream (POST /v1/responses), every
	// event named and carrying sequence_number: response.created,
	// response.in_progress, response.output_item.added and
	// response.content_part.added at once (no output), one
	// response.output_text.delta per chunk, the *.done events, then
	// response.completed with usage (input_tokens, cached_tokens,
	// output_tokens), or response.incomplete (max_output_tokens) when cut at
	// the output cap. No [DONE] (docs/STREAM_QUIRKS.md Q29, Q30, Q35). It
	// streams only.
	Responses
	// Messages is Anthropic's Messages API stream (POST /v1/messages), every
	// event named: message_start with the input usage (input_tokens without
	// the cached ones, cache_read_input_tokens) and a placeholder
	// output_tokens of 1, a ping, content_block_start, one text_delta
	// content_block_delta per chunk (a ping after the first), content_block_stop,
	// message_delta with stop_reason (end_turn or max_tokens) and the real
	// output_tokens, message_stop (Q32, Q33). It streams only.
	Messages
)

// String returns the style's name, e.g. "openai" or "vllm".
func (s Style) String() string {
	names := [...]string{"openai", "vllm", "usage-twice", "annotations", "processing-comments", "keep-alives", "reasoning-first", "responses", "messages"}
	if int(s) < len(names) {
		return names[s]
	}
	return "style(" + strconv.Itoa(int(s)) + ")"
}

// Dist is a seeded random distribution of positive values. Draw must be
// deterministic for a given source state. Implementations must be safe for
// concurrent use (the provided ones are immutable values).
type Dist interface {
	// Draw returns one value drawn with r. The unit is the caller's: seconds
	// for Profile.TTFTDist, tokens per second for Profile.TPSDist.
	Draw(r *rand.Rand) float64
}

// LogNormal is a log-normal distribution given by its median and the standard
// deviation Sigma of the underlying normal. A zero Sigma always draws Median.
// It is an immutable value, safe for concurrent use.
type LogNormal struct {
	Median float64
	Sigma  float64
}

// Draw returns Median * exp(Sigma * N(0,1)).
func (d LogNormal) Draw(r *rand.Rand) float64 {
	return d.Median * math.Exp(d.Sigma*r.NormFloat64())
}

// Uniform is a uniform distribution on [Min, Max). It is an immutable value,
// safe for concurrent use.
type Uniform struct {
	Min, Max float64
}

// Draw returns a value in [Min, Max).
func (d Uniform) Draw(r *rand.Rand) float64 {
	return d.Min + (d.Max-d.Min)*r.Float64()
}

// Phase changes a Profile's behaviour from a point in time or request count
// on. A phase applies when the handler is at least After old (measured with
// time.Now from NewHandler, so synctest virtual time works) and the request's
// attempt number for its model is at least FromAttempt. When several phases
// apply, the last one in the slice wins; zero fields keep the Profile's value.
// It is a plain value, safe for concurrent reads.
type Phase struct {
	// After is the handler age from which the phase applies; zero means
	// from the start.
	After time.Duration
	// FromAttempt is the first attempt number (per model, from 1) the phase
	// applies to; zero means every attempt.
	FromAttempt int
	// TTFT replaces Profile.TTFT (and TTFTDist); zero keeps it.
	TTFT time.Duration
	// TPS replaces Profile.TPS (and TPSDist) in tokens per second; zero keeps it.
	TPS float64
	// Status, when non-zero, answers every request of this phase with this
	// HTTP status and an OpenAI-shaped error body (e.g. 503 for an outage).
	Status int
}

// PromptCache configures a Profile's simulated prefix cache. The cache is kept
// per model on each Handler: every message prefix of a request is remembered,
// and the next request's longest remembered prefix is "cached". The zero value
// disables it. It is a plain value, safe for concurrent reads; the cache state
// lives in the Handler, guarded there.
type PromptCache struct {
	// Enabled turns the cache on.
	Enabled bool
	// TTFTFactor is the TTFT multiplier for a fully cached prompt; a partly
	// cached prompt is interpolated linearly. Zero means 0.25.
	TTFTFactor float64
	// Block rounds cached_tokens down to a multiple of Block tokens (OpenAI
	// uses 128). Zero means 1.
	Block int
}

// Profile is a synthetic provider: it streams the deterministic Text with the
// configured timing and dialect. The zero Profile answers 16 tokens at once in
// the OpenAI style. A Profile must not be modified once handed to a Handler;
// it is then safe for concurrent use.
type Profile struct {
	// TTFT is the time from the request's arrival to the first output chunk.
	// Zero means no delay.
	TTFT time.Duration
	// TPS is the generation speed in tokens per second: the gap between chunks
	// is TokensPerChunk/TPS. Zero means no delay between chunks.
	TPS float64
	// Jitter is the relative spread applied to TTFT and to every chunk gap,
	// drawn uniformly from [1-Jitter, 1+Jitter] with the seeded source.
	// Zero means none; values are clamped to [0, 1].
	Jitter float64
	// TTFTDist, when set, draws TTFT in seconds per request instead of TTFT.
	TTFTDist Dist
	// TPSDist, when set, draws TPS per request instead of TPS.
	TPSDist Dist
	// OutputTokens is the length of the answer in tokens, capped by the
	// request's max_completion_tokens or max_tokens (then finish_reason is
	// "length"). Zero means 16.
	OutputTokens int
	// ReasoningTokens is the number of reasoning tokens streamed before the
	// answer in the ReasoningFirst style. Zero means 8. Other styles ignore it.
	ReasoningTokens int
	// TokensPerChunk is the number of tokens carried by each content chunk
	// (Mistral sends several). Zero means 1.
	TokensPerChunk int
	// Style is the provider dialect. The zero value is OpenAI.
	Style Style
	// CommentInterval is the spacing of keep-alive or processing comments in
	// the KeepAlives and ProcessingComments styles, from the request's arrival
	// until the first token. Zero means 250ms.
	CommentInterval time.Duration
	// PromptCache simulates a provider prefix cache. The zero value disables it.
	PromptCache PromptCache
	// Region, when set, is sent in the x-region response header.
	Region string
	// Headers are sent with every answer, e.g. x-ratelimit-remaining-requests.
	// An x-request-id header is always sent ("req-<model>-<attempt>") unless
	// Headers sets one.
	Headers map[string]string
	// Seed seeds jitter and distributions. Each request draws from a source
	// seeded with Seed and its attempt number, so runs are reproducible.
	Seed uint64
	// Phases vary TTFT, TPS or availability over time or request count.
	Phases []Phase
	// Model, when set, is the model name in chunks; otherwise the request's.
	Model string
}

func (*Profile) sealed() {}

// timing is a Profile's decision for one request.
type timing struct {
	ttft   time.Duration
	tps    float64
	status int
}

func (p *Profile) timing(r *request, rng *rand.Rand) timing {
	t := timing{ttft: p.TTFT, tps: p.TPS}
	if p.TTFTDist != nil {
		t.ttft = time.Duration(p.TTFTDist.Draw(rng) * float64(time.Second))
	}
	if p.TPSDist != nil {
		t.tps = p.TPSDist.Draw(rng)
	}
	for _, ph := range p.Phases {
		if r.elapsed < ph.After || r.attempt < ph.FromAttempt {
			continue
		}
		t.ttft, t.tps, t.status = cmp.Or(ph.TTFT, t.ttft), cmp.Or(ph.TPS, t.tps), ph.Status
	}
	t.ttft = time.Duration(float64(t.ttft) * p.jitter(rng))
	return t
}

func (p *Profile) jitter(rng *rand.Rand) float64 {
	j := min(max(p.Jitter, 0), 1)
	if j == 0 {
		return 1
	}
	return 1 + j*(2*rng.Float64()-1)
}

// plan builds the answer to one request: headers or an error status, then
// the stream's events (see emitter).
func (p *Profile) plan(r *request) *plan {
	rng := rand.New(rand.NewPCG(p.Seed, uint64(r.attempt)))
	t := p.timing(r, rng)
	pl := newStreamPlan()
	model := cmp.Or(p.Model, r.body.Model)
	pl.header.Set("x-request-id", "req-"+model+"-"+strconv.Itoa(r.attempt))
	if p.Region != "" {
		pl.header.Set("x-region", p.Region)
	}
	for k, v := range p.Headers {
		pl.header.Set(k, v)
	}
	if t.status != 0 {
		pl.setStatus(t.status, statusBody(t.status, r.proto), nil)
		pl.outcome = strconv.Itoa(t.status)
		return pl
	}

	prompt := r.body.promptTokens()
	cached := 0
	if p.PromptCache.Enabled && r.state != nil {
		cached = r.state.cache(&r.body, max(p.PromptCache.Block, 1))
		f := cmp.Or(p.PromptCache.TTFTFactor, 0.25)
		share := float64(cached) / float64(prompt)
		t.ttft = time.Duration(float64(t.ttft) * (1 - (1-f)*share))
	}
	pieces, finish := p.output(r)
	reasoning := 0
	if p.Style == ReasoningFirst {
		reasoning = p.ReasoningTokens
		if reasoning <= 0 {
			reasoning = 8
		}
	}
	p.comments(pl, t.ttft)
	e := &emitter{
		p: p, pl: pl, t: t, rng: rng, at: t.ttft, per: max(p.TokensPerChunk, 1),
		c: chunker{
			id:      "chatcmpl-replay-" + model + "-" + strconv.Itoa(r.attempt),
			model:   model,
			created: r.start.Unix(),
			style:   p.Style,
		},
	}
	e.c.head = chunkHead(e.c.id, model, e.c.created)
	u := usage{prompt: prompt, completion: len(pieces) + reasoning, cached: cached, reasoning: reasoning}
	switch p.Style {
	case Responses:
		pl.proto = tps.ProtocolResponses
		e.streamResponses(pieces, finish, u, "resp_replay_"+model+"_"+strconv.Itoa(r.attempt))
	case Messages:
		pl.proto = tps.ProtocolMessages
		e.streamMessages(pieces, finish, u, "msg_replay_"+model+"_"+strconv.Itoa(r.attempt))
	default:
		e.stream(pieces, reasoning, finish, u, r.body.includeUsage() || !r.body.Stream)
	}
	return pl
}

// output returns the answer's tokens, the deterministic text continued after
// an assistant prefill and cut at max_tokens, and its finish reason.
func (p *Profile) output(r *request) (pieces []string, finish string) {
	total := p.OutputTokens
	if total <= 0 {
		total = 16
	}
	first, partial := 0, 0
	if r.body.lastRole() == "assistant" {
		if d, part, ok := continuation(r.body.Messages[len(r.body.Messages)-1].text()); ok {
			first, partial = d, part
		}
	}
	n := max(total-first, 0) // tokens still to generate
	finish = "stop"
	if mt, ok := r.body.maxTokens(); ok && mt < n {
		n = max(mt, 0)
		finish = "length"
	}
	// The pieces are slices of one text: one allocation, not one per token.
	ends := make([]int, n)
	b := make([]byte, 0, n*(3+len(strconv.Itoa(first+n))))
	for i := range n {
		b = append(b, 'w')
		b = strconv.AppendInt(b, int64(first+i), 10)
		b = append(b, ' ')
		ends[i] = len(b)
	}
	text := string(b)
	pieces = make([]string, n)
	start := 0
	for i, end := range ends {
		if i == 0 {
			start = partial // the rest of the token the prefill cut
		}
		pieces[i], start = text[start:end], end
	}
	return pieces, finish
}

// comments adds the comments sent while waiting for the first token, for the
// styles that send them.
func (p *Profile) comments(pl *plan, ttft time.Duration) {
	if p.Style != KeepAlives && p.Style != ProcessingComments {
		return
	}
	text := "keep-alive"
	if p.Style == ProcessingComments {
		text = "OPENROUTER PROCESSING"
	}
	iv := p.CommentInterval
	if iv <= 0 {
		iv = 250 * time.Millisecond
	}
	for at := time.Duration(0); at == 0 || at < ttft; at += iv {
		pl.events = append(pl.events, event{at: at, kind: eventComment, data: text})
	}
}

// emitter appends one answer's data events to a plan, timed from the first
// token at the profile's TPS with its jitter.
type emitter struct {
	p   *Profile
	pl  *plan
	c   chunker
	t   timing
	rng *rand.Rand
	at  time.Duration // the next event's time
	per int           // tokens per chunk
	gen float64       // generation time so far, in seconds; summed in float so gaps do not drift
}

// add appends one data event at the current time.
func (e *emitter) add(data string, output bool) {
	e.pl.events = append(e.pl.events, event{at: e.at, kind: eventData, data: data, output: output})
}

// gap advances the time by one chunk's generation.
func (e *emitter) gap() {
	if e.t.tps > 0 {
		e.gen += float64(e.per) / e.t.tps * e.p.jitter(e.rng)
		e.at = e.t.ttft + time.Duration(math.Round(e.gen*1e9))
	}
}

// stream appends the whole stream in the profile's style: the role chunk
// (after the reasoning, for ReasoningFirst), the content chunks, the finish,
// the usage and [DONE].
func (e *emitter) stream(pieces []string, reasoning int, finish string, u usage, includeUsage bool) {
	p, c, per := e.p, &e.c, e.per
	if p.Style == Annotations {
		e.add(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":`+safeFilters+`}]}`, false)
	}
	if p.Style == ReasoningFirst {
		e.add(c.chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, "", ""), false)
		for i := 0; i < reasoning; i += per {
			var b strings.Builder
			for j := i; j < min(i+per, reasoning); j++ {
				b.WriteString("r" + strconv.Itoa(j) + " ")
			}
			e.add(c.chunk(`{"reasoning_content":`+jsonString(b.String())+`}`, "", ""), true)
			e.gap()
		}
	} else {
		e.add(c.chunk(`{"role":"assistant","content":""}`, "", ""), false)
	}
	for i := 0; i < len(pieces); i += per {
		text := strings.Join(pieces[i:min(i+per, len(pieces))], "")
		fin := ""
		if i+per >= len(pieces) && p.Style == VLLM {
			fin = finish
		}
		if i > 0 {
			e.gap()
		}
		e.add(c.chunk(`{"content":`+jsonString(text)+`}`, fin, ""), true)
	}
	switch p.Style {
	case VLLM:
		if len(pieces) == 0 {
			e.add(c.chunk(`{"content":""}`, finish, ""), false)
		}
	case UsageTwice:
		e.add(c.chunk(`{}`, finish, u.json(p.Style)), false)
	case KeepAlives:
		e.add(c.chunk(`{"content":""}`, finish, u.json(p.Style)), false)
		includeUsage = false
	default:
		e.add(c.chunk(`{}`, finish, ""), false)
	}
	if p.Style == Annotations {
		e.add(`{"choices":[{"content_filter_offsets":{"check_offset":0,"start_offset":0,"end_offset":`+strconv.Itoa(len(strings.Join(pieces, "")))+`},"content_filter_results":`+safeFilters+`,"finish_reason":null,"index":0}],"created":`+strconv.FormatInt(c.created, 10)+`,"id":"`+c.id+`","model":"`+c.model+`","object":"chat.completion.chunk"}`, false)
	}
	if includeUsage {
		if p.Style == ProcessingComments {
			e.add(c.chunk(`{"role":"assistant","content":""}`, "", u.json(p.Style)), false)
		} else {
			e.add(c.usageChunk(u.json(p.Style)), false)
		}
	}
	e.add("[DONE]", false)
}

// safeFilters is Azure's content_filter_results when no filter fired.
const safeFilters = `{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":false,"severity":"safe"}}`

// statusBody returns the OpenAI-shaped error body replay sends for a status.
func statusBody(code int, proto tps.Protocol) string {
	if proto == tps.ProtocolMessages {
		return anthropicStatusBody(code)
	}
	switch code {
	case http.StatusTooManyRequests:
		return errorBody("replay: rate limit reached; please try again later", "requests", "rate_limit_exceeded")
	case http.StatusUnauthorized:
		return errorBody("replay: incorrect API key provided", "invalid_request_error", "invalid_api_key")
	case http.StatusBadRequest:
		return errorBody("replay: bad request", "invalid_request_error", "")
	case http.StatusServiceUnavailable:
		return errorBody("replay: the server is overloaded or not ready yet", "server_error", "")
	}
	if code >= 500 {
		return errorBody("replay: the server had an error while processing your request", "server_error", "")
	}
	return errorBody("replay: "+http.StatusText(code), "invalid_request_error", "")
}

// anthropicStatusBody returns Anthropic's error body for an HTTP status, as
// its Messages API answers: {"type":"error","error":{"type","message"}}.
func anthropicStatusBody(code int) string {
	typ, msg := "invalid_request_error", "replay: "+http.StatusText(code)
	switch {
	case code == http.StatusTooManyRequests:
		typ, msg = "rate_limit_error", "replay: rate limit reached"
	case code == http.StatusUnauthorized:
		typ, msg = "authentication_error", "replay: invalid x-api-key"
	case code == 529, code == http.StatusServiceUnavailable:
		typ, msg = "overloaded_error", "Overloaded"
	case code >= 500:
		typ, msg = "api_error", "replay: internal server error"
	}
	return `{"type":"error","error":{"type":"` + typ + `","message":` + jsonString(msg) + `}}`
}

// jsonString returns s quoted as a JSON string (payload.AppendQuoted). A
// short string is quoted on the stack: one allocation, the result's.
func jsonString(s string) string {
	var buf [64]byte
	return string(payload.AppendQuoted(buf[:0], s))
}

// usage is the token accounting of one synthetic answer.
type usage struct {
	prompt, completion, cached, reasoning int
}

func (u usage) json(s Style) string {
	j := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}`,
		u.prompt, u.completion, u.prompt+u.completion, u.cached, u.reasoning)
	if s == KeepAlives || s == ReasoningFirst {
		j += fmt.Sprintf(`,"prompt_cache_hit_tokens":%d,"prompt_cache_miss_tokens":%d`, u.cached, u.prompt-u.cached)
	}
	return j + "}"
}

// chunker renders chat.completion.chunk payloads in one style.
type chunker struct {
	id, model string
	created   int64
	style     Style
	head      string // chunkHead(id, model, created)
}

// chunk renders a one-choice chunk. finish "" is null; usage "" is null (or
// absent in the vLLM style).
func (c chunker) chunk(delta, finish, usage string) string {
	fin := "null"
	if finish != "" {
		fin = jsonString(finish)
	}
	var b strings.Builder
	b.Grow(len(c.head) + len(delta) + len(usage) + 160)
	b.WriteString(c.head)
	switch c.style {
	case VLLM:
		writeParts(&b, `,"choices":[{"index":0,"delta":`, delta, `,"logprobs":null,"finish_reason":`, fin, `,"stop_reason":null}]`)
		if usage != "" {
			writeParts(&b, `,"usage":`, usage)
		}
	case Annotations:
		writeParts(&b, `,"system_fingerprint":"fp_replay","choices":[{"index":0,"delta":`, delta, `,"logprobs":null,"finish_reason":`, fin)
		if strings.Contains(delta, `"content":"`) && delta != `{"role":"assistant","content":""}` {
			writeParts(&b, `,"content_filter_results":`, safeFilters)
		}
		writeParts(&b, `}],"usage":`, cmp.Or(usage, "null"))
	case UsageTwice:
		writeParts(&b, `,"system_fingerprint":"fp_replay","choices":[{"index":0,"delta":`, delta, `,"logprobs":null,"finish_reason":`, fin, `}]`)
		if usage != "" {
			writeParts(&b, `,"x_groq":{"id":"req_replay","usage":{"queue_time":0.01,"prompt_time":0.002,"completion_time":0.1,"total_time":0.112,`, strings.TrimPrefix(usage, "{"), `}`)
			writeParts(&b, `,"usage":`, usage)
		}
	default:
		writeParts(&b, `,"system_fingerprint":"fp_replay","choices":[{"index":0,"delta":`, delta, `,"logprobs":null,"finish_reason":`, fin, `}],"usage":`, cmp.Or(usage, "null"))
	}
	b.WriteByte('}')
	return b.String()
}

// writeParts appends the parts to b, without the string each
// concatenation would allocate.
func writeParts(b *strings.Builder, parts ...string) {
	for _, p := range parts {
		b.WriteString(p)
	}
}

// chunkHead is the start of every chunk of one answer: its id, object,
// created and model.
func chunkHead(id, model string, created int64) string {
	return `{"id":` + jsonString(id) + `,"object":"chat.completion.chunk","created":` + strconv.FormatInt(created, 10) + `,"model":` + jsonString(model)
}

// usageChunk renders the final usage chunk with choices [].
func (c chunker) usageChunk(usage string) string {
	return c.head + `,"choices":[],"usage":` + usage + `}`
}
