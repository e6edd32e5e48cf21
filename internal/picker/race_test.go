//go:build race

package picker

// raceEnabled reports whether the race detector is on: it makes sync.Pool
// drop items at random, so the pooled scratch is allocated again now and
// then and allocation counts mean nothing.
const raceEnabled = true
