package tps

import "github.com/tpsroute/tpsroute/internal/payload"

// The names below are unexported in the package (the Tap and Wrap are the
// doors users measure through) and exported here for the external tests,
// which drive the timer with exact times.

// Timer is the unexported timer, for tests.
type Timer = timer

// NewTimer is newTimer, for tests.
var NewTimer = newTimer

// MaxEvent is WithMaxEvent's default, for tests.
const MaxEvent = maxEvent

// UsageSlack is the plausible-usage slack, for tests.
const UsageSlack = usageSlack

// The chunk parser lives in internal/payload; the tests of the doors that
// feed it name its types as tps's, as they did before it moved.
type (
	Chunk         = payload.Chunk
	ChoiceDelta   = payload.ChoiceDelta
	ToolCallDelta = payload.ToolCallDelta
)

// ParseChunk is internal/payload's, for tests.
var ParseChunk = payload.ParseChunk

// Parse is the unexported parse, for tests.
func (p Protocol) Parse(data []byte, c *Chunk) error { return p.parse(data, c) }

// WithObserver is the unexported withObserver, for tests.
var WithObserver = withObserver
