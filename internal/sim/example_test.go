package sim_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/tpsroute/tpsroute/internal/sim"
)

// Score the oracle and round-robin on the bundled static scenario (three
// deployments at 1500, 600 and 300 tok/s). Inside a synctest bubble the ten
// simulated minutes pass in virtual time.
func Example() {
	sc, err := sim.Bundled("static")
	if err != nil {
		panic(err)
	}
	synctest.Test(&testing.T{}, func(*testing.T) {
		rep, err := sim.Compare(context.Background(), sc, []sim.Policy{sim.Oracle(), sim.RoundRobin()})
		if err != nil {
			panic(err)
		}
		for _, r := range rep.Results {
			fmt.Printf("%s: %.0f tok/s\n", r.Policy, r.Summary.TPSMean)
		}
	})
	// Output:
	// oracle: 1500 tok/s
	// round-robin: 800 tok/s
}
