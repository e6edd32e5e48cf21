package executor

// The defaults the external tests compare with.
const (
	DefaultHeadersTimeout  = defaultHeadersTimeout
	DefaultTTFTTimeout     = defaultTTFTTimeout
	DefaultStallTimeout    = defaultStallTimeout
	DefaultMaxDuration     = defaultMaxDuration
	DefaultSilence         = defaultSilence
	DefaultFinishGrace     = defaultFinishGrace
	DefaultPenaltyCooldown = defaultPenaltyCooldown
)
