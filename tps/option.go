package tps

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/tpsseam"
)

// Tokenizer counts the tokens in a piece of text. tps has no built-in
// vocabulary; supply one (for example a tiktoken port) to count the first
// chunk's tokens exactly and to count all output tokens when the server sends
// no usage. Implementations used by concurrent streams must be safe for
// concurrent use. tps calls Count when a stream finishes, and when
// Stream.Sample is asked for a provisional Sample.
type Tokenizer interface {
	// Count returns the number of tokens in text.
	Count(text string) int
}

// Option configures a Tap or a Stream. The zero set of options
// means: no tokenizer, no observers, headers time taken when the Tap or
// Stream is created. An Option is immutable and may be reused across streams
// and goroutines; later options override earlier ones.
type Option func(*options)

type options struct {
	tokenizer Tokenizer
	observer  func(now time.Time, c *payload.Chunk)
	comment   func(now time.Time, text []byte)
	headers   time.Time
	maxEvent  int
	protocol  Protocol
}

func buildOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// WithTokenizer counts output tokens with t: the first output chunk's tokens
// always, and all output tokens when the stream carries no usage. A nil t
// means no tokenizer. With a tokenizer the measurement keeps the stream's output
// text (content, reasoning, refusal) until Finish. Tool-call arguments are
// not counted; when the count is 0 the output-delta count is used instead.
func WithTokenizer(t Tokenizer) Option {
	return func(o *options) { o.tokenizer = t }
}

// The module's doors reach withObserver through internal/tpsseam.
func init() { tpsseam.WithObserver = withObserver }

// withObserver calls fn for every data event, after the measurement has
// recorded it: internal/tpsseam.WithObserver, set by init, documents it. It
// is unexported since the chunk it hands over is internal/payload's.
func withObserver(fn func(now time.Time, c *payload.Chunk)) Option {
	return func(o *options) { o.observer = fn }
}

// WithCommentObserver calls fn synchronously for every SSE comment (a line
// starting with ':', such as ": keep-alive" or ": OPENROUTER PROCESSING"),
// after the measurement has counted it. text is the comment without the leading
// colon, valid only until fn returns. Only a Tap sees comments: openai-go
// drops them before Stream can. A nil fn means no observer.
func WithCommentObserver(fn func(now time.Time, text []byte)) Option {
	return func(o *options) { o.comment = fn }
}

// WithHeaders sets the time the response headers arrived. By default NewTap
// and Wrap take time.Now() when they are called, which is right when they
// are called as soon as the response is returned. A zero t keeps the default.
func WithHeaders(t time.Time) Option {
	return func(o *options) { o.headers = t }
}

// WithMaxEvent sets a Tap's cap, in bytes, on one SSE line and on the data
// of one event; past it the Tap reports the event as Malformed and
// Unframed at once (see NewTap). Zero or less keeps the default, 4 MiB.
// A Stream ignores it.
func WithMaxEvent(n int) Option {
	return func(o *options) { o.maxEvent = n }
}
