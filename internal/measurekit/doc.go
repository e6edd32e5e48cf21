// Package measurekit holds what package measure (the statistics vocabulary)
// and internal/registry (the Registry, the engine behind it) share and
// neither can own without importing the other: the saturating counter
// arithmetic and the picodollar cost rule (measure's Price.Dollars and the
// Registry's cost meters), the load factor (measure's Estimate.LoadFactor
// and the Registry's load model), the published table of prompt-size
// classes an Estimate points to (Estimate.Input), and two hooks through
// which the Registry fills what measure keeps unexported (an Estimate's
// class table, a Snapshot's contents).
//
// It imports nothing of the module, so that both may import it. It is
// internal: users name measure's types, never these.
package measurekit
