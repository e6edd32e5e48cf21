package tps

import "reflect"

// ParseChunkTrusted exposes the trusted parser Stream uses, for tests.
func ParseChunkTrusted(data []byte, c *Chunk) error { return parseChunk(data, c, true) }

// SameChunk reports whether a and b hold the same parse result.
func SameChunk(a, b Chunk) bool {
	a.buf, b.buf = nil, nil
	return reflect.DeepEqual(a, b)
}
