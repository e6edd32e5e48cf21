package executor

import (
	"time"

	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/internal/tpsseam"
	"github.com/tpsroute/tpsroute/tps"
)

// withObserver is tps's chunk observer option (internal/tpsseam), asserted
// once: tps is initialized before this package.
var withObserver = tpsseam.WithObserver.(func(func(time.Time, *payload.Chunk)) tps.Option)
