package route

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDeploymentAPIs(t *testing.T) {
	tests := []struct {
		name   string
		apis   []API
		serves []API
		keyAPI string
		bad    string // Validate's reason, "" when valid
	}{
		{name: "default is chat", serves: []API{APIChat}},
		{name: "chat only", apis: []API{APIChat}, serves: []API{APIChat}},
		{name: "responses only", apis: []API{APIResponses}, serves: []API{APIResponses}, keyAPI: "responses"},
		{name: "all four", apis: []API{APIChat, APIResponses, APIMessages, APIEmbeddings}, serves: []API{APIChat, APIResponses, APIMessages, APIEmbeddings}},
		{name: "two without chat", apis: []API{APIMessages, APIEmbeddings}, serves: []API{APIMessages, APIEmbeddings}},
		{name: "unknown", apis: []API{"completions"}, bad: `unknown API "completions"; known: "chat", "responses", "messages", "embeddings"`},
		{name: "twice", apis: []API{APIChat, APIResponses, APIChat}, bad: `"chat" twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := dep("openai", "us", "gpt")
			d.APIs = tt.apis
			err := d.Validate()
			if tt.bad != "" {
				var de *DeploymentError
				require.ErrorAs(t, err, &de)
				assert.Equal(t, "APIs", de.Field)
				assert.Equal(t, tt.bad, de.Reason)
				return
			}
			require.NoError(t, err)
			for _, a := range apis {
				assert.Equal(t, contains(tt.serves, a), d.Serves(a), "Serves(%s)", a)
				n := d.ForAPI(a)
				assert.Equal(t, []API{a}, n.APIs)
				want := string(a)
				if a == APIChat {
					want = ""
				}
				assert.Equal(t, want, n.Key().API, "ForAPI(%s).Key().API", a)
			}
			assert.Equal(t, tt.keyAPI, d.Key().API)
		})
	}
}

func contains(l []API, a API) bool {
	for _, v := range l {
		if v == a {
			return true
		}
	}
	return false
}

func TestAPIPath(t *testing.T) {
	for a, want := range map[API]string{APIChat: "chat/completions", APIResponses: "responses", APIMessages: "messages", APIEmbeddings: "embeddings", "": "", "Chat": ""} {
		assert.Equal(t, want, a.Path(), "%q", a)
		assert.Equal(t, want != "", a.Known(), "%q", a)
	}
}

func TestAPIError(t *testing.T) {
	a := dep("openai", "us", "gpt")
	b := dep("anthropic", "us", "gpt")
	b.APIs = []API{APIMessages}
	w := dep("any", "", Wildcard)
	w.APIs = []API{APIEmbeddings}
	ds := []Deployment{a, b, w}
	assert.Equal(t, []API{APIChat, APIMessages, APIEmbeddings}, ServedAPIs(ds, "gpt@v2"))
	assert.Equal(t, []API{APIEmbeddings}, ServedAPIs(ds, "other"))
	assert.Nil(t, ServedAPIs(ds[:2], "other"))

	err := error(&APIError{API: APIResponses, Model: "gpt", Served: ServedAPIs(ds[:2], "gpt")})
	assert.True(t, errors.Is(err, ErrNoDeployment))
	assert.Equal(t, `route: no deployment: model "gpt" is not served on the responses API (served on: chat, messages); tpsroute does not translate between APIs`, err.Error())
}
