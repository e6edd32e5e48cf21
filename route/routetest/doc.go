// Package routetest checks implementations of route.Scorer against the
// contract the picker (the tpsroute Client's) relies on, as testing/slogtest
// does for slog handlers.
//
// # Usage
//
//	func TestMyScorer(t *testing.T) {
//		routetest.TestScorer(t, myScorer{}, routetest.PrefersTPS)
//	}
//
// # What is checked
//
// Every scorer must: never panic; never return NaN, for any statistics the
// picker can pass (cold, one sample, tiny, huge) and any deployment (free,
// expensive, wildcard); return the same score for the same inputs, whatever
// was scored before; be safe for concurrent use; and leave the Request
// unmodified. A scorer may also declare properties (PrefersTPS,
// PrefersLowTTFT, PrefersLowPrice): its score must then be monotone in that
// value, all else equal, and must not rank a missing value above a known one.
//
// It is for the tests of programs that set a custom Scorer
// (route.Options.Scorer, route.Request.Scorer); no package of the module
// imports it. TestScorer runs each check as a subtest of t; Check runs the
// same checks outside a test and returns every violation, joined in one
// error.
package routetest
