// Package tpsseam lets the module's own doors attach what users never
// attach to a tps.Tap: an observer of every parsed chunk (WithObserver),
// whose argument, an internal/payload Chunk, is not part of tps's public
// API. tps sets it in its init, as fallback does internal/fallbackseam's;
// internal/executor asserts its type once, at its own initialization, which
// comes after tps's. So the Tap's observer serves the executor (the commit
// point, stall deadlines, in-stream errors, the answer assembly) without a
// public function that names an internal type.
//
// It imports nothing of the module (tps imports it, and its users import
// both), so WithObserver is an any holding the func type its comment names.
// It is written once, before any package that imports tps runs, and only
// read afterwards: safe for concurrent use.
package tpsseam
