package payload_test

import (
	"testing"

	"github.com/tpsroute/tpsroute/internal/payload"
)

// benchChunk is a typical OpenAI output chunk, obfuscation field included
// (tps's benchmarks time the same one).
const benchChunk = `{"id":"chatcmpl-AbCdEfGh","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0ba0d124f1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Xy12"}`

func BenchmarkParseChunk(b *testing.B) {
	data := []byte(benchChunk)
	var c payload.Chunk
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := payload.ParseChunk(data, &c); err != nil {
			b.Fatal(err)
		}
	}
}
