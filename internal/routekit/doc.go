// Package routekit is the seam between route's vocabulary and its engine,
// internal/picker. The engine fills in parts of route's types that users
// read but never set (an Expected's call factors, a Candidate's
// precomputed key), and applies rules that live next to those types (an
// SLO's check, a Policy's score); exporting them from route would put
// engine plumbing back on the public surface. Instead route hands its
// implementation to Kernel when it is initialised, and internal/picker,
// which imports route, reads it once through an interface of its own.
//
// It also holds the numeric rules both packages apply (Clamp, Valid, One:
// how a call factor reads), so that each
// has one home and stays inlinable.
package routekit
