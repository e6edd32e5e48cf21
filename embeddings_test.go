package tpsroute

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// apiEmbeddings is an embeddings answer with base64 vectors, pretty-printed
// as some servers send it.
const apiEmbeddings = "{\n  \"object\": \"list\",\n  \"data\": [\n    {\"object\": \"embedding\", \"index\": 0, \"embedding\": \"AACAPwAAAEA=\"},\n" +
	"    {\"object\": \"embedding\", \"index\": 1, \"embedding\": \"AABAQAAAgEA=\"}\n  ],\n  \"model\": \"text-embedding-3-small\",\n" +
	"  \"usage\": {\"prompt_tokens\": 8, \"total_tokens\": 8}\n}\n"

// TestEmbeddings: POST .../embeddings through the Transport (openai-go's
// client.Embeddings), Client.Embeddings.New and DoAPI route a batch whole to
// the deployments that declare embeddings, fail over on an error, answer
// the provider's JSON (base64 vectors untouched), send no "stream" field, and
// meter the input tokens under the embeddings key, with the answer's latency
// as TTFT.
func TestEmbeddings(t *testing.T) {
	down := newAPIUpstream(t, map[string]apiAnswerSpec{"embeddings": {http.StatusInternalServerError, `{"error":{"message":"down"}}`}})
	up := newAPIUpstream(t, map[string]apiAnswerSpec{"embeddings": {200, apiEmbeddings}})
	chat := newAPIUpstream(t, map[string]apiAnswerSpec{"chat/completions": {200, apiChatStream}})
	c := apiClient(t, apiDep("down", down, route.APIEmbeddings), apiDep("up", up, route.APIEmbeddings), apiDep("chat", chat))

	oc := openai.NewClient(option.WithBaseURL("http://tpsroute.invalid/v1"), option.WithAPIKey("caller-secret"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := openai.EmbeddingNewParams{
		Model:          "m",
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"first", "second"}},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
	}
	ctx := ContextWithOptions(context.Background(), WithPin("down", ""))
	got, err := oc.Embeddings.New(ctx, params)
	require.NoError(t, err)
	require.Len(t, got.Data, 2)
	assert.Equal(t, int64(8), got.Usage.PromptTokens)

	typed, err := c.Embeddings.New(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, got.Data[1].Embedding, typed.Data[1].Embedding)

	r, err := c.DoAPI(ctx, route.APIEmbeddings, []byte(`{"model":"m","input":["first","second"],"encoding_format":"base64"}`))
	require.NoError(t, err)
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	require.NoError(t, r.Body.Close())
	assert.JSONEq(t, apiEmbeddings, string(b))
	assert.Equal(t, "AABAQAAAgEA=", gjson.GetBytes(b, "data.1.embedding").Str, "base64 vectors pass untouched")
	assert.Equal(t, "up", r.Outcome().Deployment.Provider)
	assert.Equal(t, 2, r.Outcome().AttemptCount, "the pinned deployment failed first")

	reqs, paths := up.requests()
	require.Len(t, reqs, 3)
	for i, rq := range reqs {
		assert.Equal(t, "/v1/embeddings", paths[i])
		assert.Equal(t, "Bearer key-up-", rq.Header.Get("Authorization"))
		assert.Equal(t, []string{"first", "second"}, toStrings(gjson.Get(rq.Body, "input").Array()), "the batch whole")
		assert.False(t, gjson.Get(rq.Body, "stream").Exists(), "embeddings take no stream field: %s", rq.Body)
		assert.False(t, gjson.Get(rq.Body, "stream_options").Exists())
	}
	chatReqs, _ := chat.requests()
	assert.Empty(t, chatReqs)

	st, ok := c.Stats().Lookup(measure.Key{Provider: "up", Model: "m", API: "embeddings"})
	require.True(t, ok)
	assert.Equal(t, int64(3), st.Successes)
	assert.Equal(t, int64(24), st.InputTokens)
	assert.Positive(t, st.TTFT.P50, "the answer's latency is measured")
	_, ok = c.Stats().Lookup(measure.Key{Provider: "up", Model: "m"})
	assert.False(t, ok)

	_, err = c.DoAPI(context.Background(), route.APIEmbeddings, []byte(`{"model":"m","input":5}`))
	var re *RequestError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "input", re.Param)
	_, err = c.DoAPI(context.Background(), route.APIEmbeddings, []byte(`{"model":"nope","input":"x"}`))
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "nope"), err.Error())
}

func toStrings(rs []gjson.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Str
	}
	return out
}

// TestEmbeddingsBatchWhole: a batch is one request on every attempt: the
// "input" array (strings, token arrays) reaches each deployment tried,
// retried, failed over or answering, byte for byte and in one piece.
func TestEmbeddingsBatchWhole(t *testing.T) {
	big := make([]string, 300)
	for i := range big {
		big[i] = fmt.Sprintf(`"text %d, with \"quotes\" and \u00e9"`, i)
	}
	for _, tc := range []struct{ name, input string }{
		{"strings", "[" + strings.Join(big, ",") + "]"},
		{"token arrays", `[[1,2,3],[40000,5],[6]]`},
		{"one token array", `[1,2,3,4]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			down := newAPIUpstream(t, map[string]apiAnswerSpec{"embeddings": {http.StatusInternalServerError, `{"error":{"message":"down"}}`}})
			up := newAPIUpstream(t, map[string]apiAnswerSpec{"embeddings": {200, apiEmbeddings}})
			c := apiClient(t, apiDep("down", down, route.APIEmbeddings), apiDep("up", up, route.APIEmbeddings))
			ctx := ContextWithOptions(context.Background(), WithPin("down", ""))
			r, err := c.DoAPI(ctx, route.APIEmbeddings, []byte(`{"model":"m","input":`+tc.input+`}`))
			require.NoError(t, err)
			_, err = io.Copy(io.Discard, r.Body)
			require.NoError(t, err)
			require.NoError(t, r.Body.Close())
			downReqs, _ := down.requests()
			upReqs, _ := up.requests()
			require.Len(t, upReqs, 1)
			assert.Len(t, append(downReqs, upReqs...), r.Outcome().AttemptCount, "one request per attempt: the batch is not split")
			for _, rq := range append(downReqs, upReqs...) {
				assert.Equal(t, tc.input, gjson.Get(rq.Body, "input").Raw, "the batch whole, byte for byte")
			}
		})
	}
}

// TestEmbeddingsTokens: an embeddings call is routed on its input tokens:
// token arrays counted, strings at 4 bytes a token, a batch summed.
func TestEmbeddingsTokens(t *testing.T) {
	for _, tc := range []struct {
		input string
		want  int64
	}{
		{`"twelve bytes"`, 3},
		{`["twelve bytes","four"]`, 4},
		{`[1,2,3,4,5]`, 5},
		{`[[1,2,3],[4,5],[6]]`, 6},
		{`""`, 1},
	} {
		t.Run(tc.input, func(t *testing.T) {
			info, err := readAPIRequest([]byte(`{"model":"m","input":`+tc.input+`}`), route.APIEmbeddings)
			require.NoError(t, err)
			assert.Equal(t, tc.want, info.InputTokens)
		})
	}
}

// TestEmbeddingsLargeAnswer: an embeddings answer is one JSON body, bounded
// by Limits.Answer (32 MiB by default), not by the 4 MiB cap on one event of
// a stream: a batch of 400 float vectors of 1,536 dimensions, about 7.6 MiB,
// reaches the caller whole through DoAPI, the typed Client and the
// Transport; one past Limits.Answer fails with ErrTooLarge.
func TestEmbeddingsLargeAnswer(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"object":"list","data":[`)
	for i := range 400 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"object":"embedding","index":%d,"embedding":[`, i)
		for j := range 1536 {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("-0.012345678")
		}
		sb.WriteString("]}")
	}
	sb.WriteString(`],"model":"m","usage":{"prompt_tokens":400,"total_tokens":400}}`)
	answer := sb.String()
	require.Greater(t, len(answer), 6<<20)

	up := newAPIUpstream(t, map[string]apiAnswerSpec{"embeddings": {200, answer}})
	c := apiClient(t, apiDep("up", up, route.APIEmbeddings))
	r, err := c.DoAPI(context.Background(), route.APIEmbeddings, []byte(`{"model":"m","input":["a","b"]}`))
	require.NoError(t, err)
	b, err := io.ReadAll(r.Body)
	require.NoError(t, err)
	require.NoError(t, r.Body.Close())
	assert.Equal(t, len(answer), len(b))
	assert.Equal(t, int64(400), gjson.GetBytes(b, "data.#").Int())

	typed, err := c.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	require.NoError(t, err)
	require.Len(t, typed.Data, 400)
	assert.Len(t, typed.Data[399].Embedding, 1536)

	oc := openai.NewClient(option.WithBaseURL("http://tpsroute.invalid/v1"), option.WithAPIKey("caller-secret"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	viaTransport, err := oc.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "m", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}}})
	require.NoError(t, err)
	require.Len(t, viaTransport.Data, 400)

	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	small := mustNew(t, Config{Deployments: []route.Deployment{apiDep("up", up, route.APIEmbeddings)}, HTTPClient: &http.Client{Transport: tr},
		Route: route.Options{Seed: 1}, Fallback: fallback.Options{Limits: fallback.Limits{Answer: 1 << 20}}})
	_, err = small.DoAPI(context.Background(), route.APIEmbeddings, []byte(`{"model":"m","input":["a","b"]}`))
	assert.ErrorIs(t, err, fallback.ErrTooLarge)
}
