//go:build race

package sim

// raceEnabled reports whether the race detector is on: it makes every
// simulated call about four times dearer, so TestScenarios then checks only
// raceScenarios.
const raceEnabled = true
