package tpsroute

import (
	"hash/crc32"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// longSystemBody is a chat body whose first message is a system prompt of n
// bytes of text, followed by a user message.
func longSystemBody(n int) []byte {
	return []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("a", n) + `"},{"role":"user","content":"hi"}]}`)
}

// TestPrefixCacheKey: a long first message followed by more gives the hash
// of the message's JSON as it lies in the body, wherever that is; a short
// one, or one alone, gives none.
func TestPrefixCacheKey(t *testing.T) {
	first := `{"role":"system","content":"` + strings.Repeat("a", minCachePrefixBytes) + `"}`
	raw := []byte(first)
	want := "prefix:" + strconv.FormatUint(uint64(crc32.Checksum(raw, crc32.MakeTable(crc32.Castagnoli)))<<32|uint64(crc32.ChecksumIEEE(raw)), 16)
	assert.Equal(t, want, prefixCacheKey(longSystemBody(minCachePrefixBytes)))
	spaced := "{ \"model\" : \"m\",\n  \"messages\": [ " + first + " ,\n {\"role\":\"user\",\"content\":\"other\"} ] }"
	assert.Equal(t, want, prefixCacheKey([]byte(spaced)), "the same first message, elsewhere in another body")
	assert.NotEqual(t, want, prefixCacheKey(longSystemBody(minCachePrefixBytes+1)), "another first message")
	frame := len(`{"role":"system","content":""}`)
	assert.NotEmpty(t, prefixCacheKey(longSystemBody(minCachePrefixBytes-frame)), "a first message of minCachePrefixBytes")
	assert.Empty(t, prefixCacheKey(longSystemBody(minCachePrefixBytes-frame-1)), "one byte shorter")
	assert.Empty(t, prefixCacheKey([]byte(`{"model":"m","messages":[`+first+`]}`)), "no message after it")
	assert.Empty(t, prefixCacheKey(nil))
}

// BenchmarkPrefixCacheKey hashes a 16 KiB system prompt, the key every call
// without a prompt_cache_key gets.
func BenchmarkPrefixCacheKey(b *testing.B) {
	body := longSystemBody(16 << 10)
	b.ReportAllocs()
	for b.Loop() {
		if prefixCacheKey(body) == "" {
			b.Fatal("no key")
		}
	}
}
