package tps

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
