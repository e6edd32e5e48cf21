// Package measurekit holds what package measure (the statistics vocabulary)
// and internal/registry (the Registry, the engine behind it) share and
// neither can own without importing the other: the saturating counter
// arithmetic and the picodollar cost rule (measure's Price.Dollars and the
// Registry's cost meters), and the hook through which the Registry fills
// what measure keeps unexported (a Snapshot's contents).
//
// It imports nothing of the module, so that both may import it. It is
// internal: users name measure's types, never these.
package measurekit
