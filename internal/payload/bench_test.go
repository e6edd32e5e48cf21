package payload_test

import (
	"encoding/json"
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

// BenchmarkAppendQuoted quotes a model name and a line of text with
// escapes, into a reused buffer, against encoding/json's Marshal of the same
// strings.
func BenchmarkAppendQuoted(b *testing.B) {
	in := []string{"gpt-4o-mini-2024-07-18", "Hello \"world\",\nsaid the 🙂 model\tagain."}
	b.Run("AppendQuoted", func(b *testing.B) {
		buf := make([]byte, 0, 128)
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range in {
				buf = payload.AppendQuoted(buf[:0], s)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, s := range in {
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
