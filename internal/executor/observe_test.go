package executor_test

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/tpsseam"
	"github.com/tpsroute/tpsroute/tps"
)

// withObserver is tps's chunk observer option, for the tests that read a
// body's chunks through a Tap.
var withObserver = tpsseam.WithObserver.(func(func(time.Time, *payload.Chunk)) tps.Option)
