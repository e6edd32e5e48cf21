//go:build race

package executor_test

// raceEnabled reports whether the race detector is on: it changes what the
// heap holds per call, so TestLimitsBoundHeap, a budget of the production
// build, is skipped under it.
const raceEnabled = true
