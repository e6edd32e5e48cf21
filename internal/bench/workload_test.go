package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadPrompts(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Prompt
		errLine int // 0: no PromptError expected
		errAny  bool
	}{
		{
			name: "prompt and messages",
			in: "# comment\n{\"prompt\":\"hi\",\"max_tokens\":8}\n\n" +
				`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}`,
			want: []Prompt{
				{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 8},
				{Messages: []Message{{Role: "system", Content: "s"}, {Role: "user", Content: "u"}}},
			},
		},
		{name: "unknown field", in: `{"prompt":"x","temperature":0}`, errLine: 1},
		{name: "both", in: "{\"prompt\":\"x\"}\n" + `{"prompt":"x","messages":[{"role":"user","content":"y"}]}`, errLine: 2},
		{name: "neither", in: `{"max_tokens":3}`, errLine: 1},
		{name: "bad role", in: `{"messages":[{"role":"robot","content":"y"}]}`, errLine: 1},
		{name: "negative max_tokens", in: `{"prompt":"x","max_tokens":-1}`, errLine: 1},
		{name: "not JSON", in: `prompt: x`, errLine: 1},
		{name: "empty file", in: "\n# nothing\n", errAny: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadPrompts(strings.NewReader(tt.in))
			switch {
			case tt.errLine > 0:
				var pe *PromptError
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tt.errLine, pe.Line)
				assert.True(t, strings.HasPrefix(err.Error(), "bench: prompts line "))
			case tt.errAny:
				require.Error(t, err)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.want, got)
			}
		})
	}
}

func TestWorkloadBuild(t *testing.T) {
	t.Run("synthetic lengths cycle and are deterministic", func(t *testing.T) {
		w := Workload{InputTokens: []int{10, 30}, Seed: 3, MaxTokens: 64}
		p0, p1, p2 := w.build(0, Cold, "n"), w.build(1, Cold, "n"), w.build(2, Cold, "n")
		require.Len(t, p0.Messages, 1)
		words := func(p Prompt) int { return len(strings.Fields(p.Messages[len(p.Messages)-1].Content)) - 2 } // minus the nonce
		assert.Equal(t, 10, words(p0))
		assert.Equal(t, 30, words(p1))
		assert.Equal(t, 10, words(p2))
		assert.Equal(t, 64, p0.MaxTokens)
		assert.Equal(t, p0, w.build(0, Cold, "n"), "same seed, same prompt")
		other := Workload{InputTokens: []int{10, 30}, Seed: 4}
		assert.NotEqual(t, p0.Messages[0].Content, other.build(0, Cold, "n").Messages[0].Content)
	})
	t.Run("cold prefixes are unique from the first byte", func(t *testing.T) {
		w := Workload{SystemTokens: 50}
		seen := map[string]bool{}
		for i := range 50 {
			p := w.build(i, Cold, "run1")
			require.Equal(t, "system", p.Messages[0].Role)
			head := p.Messages[0].Content[:24]
			assert.False(t, seen[head], "request %d shares its first bytes", i)
			seen[head] = true
		}
		assert.NotEqual(t, w.build(0, Cold, "run1").Messages[0].Content, w.build(0, Cold, "run2").Messages[0].Content)
	})
	t.Run("warm requests share the system prefix", func(t *testing.T) {
		w := Workload{}
		a, b, prime := w.build(0, Warm, "s"), w.build(7, Warm, "s"), w.build(-1, Warm, "s")
		require.Len(t, a.Messages, 2)
		assert.Equal(t, a.Messages[0], b.Messages[0])
		assert.Equal(t, a.Messages[0], prime.Messages[0])
		assert.NotEqual(t, a.Messages[1], b.Messages[1])
		assert.Len(t, strings.Fields(a.Messages[0].Content), DefaultWarmPrefix+2)
		assert.NotEqual(t, a.Messages[0], w.build(0, Warm, "other-run").Messages[0])
	})
	t.Run("recorded prompts keep their cap and cycle", func(t *testing.T) {
		w := Workload{MaxTokens: 100, Prompts: []Prompt{
			{Messages: []Message{{Role: "user", Content: "a"}}, MaxTokens: 5},
			{Messages: []Message{{Role: "user", Content: "b"}}},
		}}
		p0, p1, p2 := w.build(0, Cold, "n"), w.build(1, Cold, "n"), w.build(2, Cold, "n")
		assert.Equal(t, 5, p0.MaxTokens)
		assert.Equal(t, 100, p1.MaxTokens)
		assert.True(t, strings.HasSuffix(p2.Messages[0].Content, "a"))
		assert.Equal(t, "a", w.Prompts[0].Messages[0].Content, "the workload is not modified")
	})
	t.Run("body is valid JSON", func(t *testing.T) {
		p := Prompt{Messages: []Message{{Role: "user", Content: "quote \" and \\ and \n"}}, MaxTokens: 9}
		assert.JSONEq(t, `{"model":"m\"x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"quote \" and \\ and \n"}]}`,
			string(appendBody(nil, `m"x`, &p)))
	})
}

func TestParseCacheModes(t *testing.T) {
	tests := []struct {
		in   string
		want []CacheMode
		err  bool
	}{
		{in: "", want: []CacheMode{Cold}},
		{in: "warm", want: []CacheMode{Warm}},
		{in: "Both", want: []CacheMode{Cold, Warm}},
		{in: "hot", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCacheModes(tt.in)
			if tt.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
