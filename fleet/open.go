package fleet

import (
	"log/slog"

	"github.com/tpsroute/tpsroute"
)

// Open returns a Fleet for a config file's "fleet" section
// (config.File.Fleet), logging to logger (nil: silent). Like
// New, it fails when s names no Redis URL.
func Open(s tpsroute.FleetSettings, logger *slog.Logger) (*Fleet, error) {
	return New(Options{URL: s.RedisURL, Name: s.Name, Sync: s.Sync, Logger: logger})
}

var _ tpsroute.Fleet = (*Fleet)(nil)
