package executor_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/route"
)

// TestDefaultBuildURL checks that the chat-completions path is joined to the
// base URL's path, never appended after its query, and that user info is
// refused rather than dropped (docs/CONFIG.md, base_url).
func TestDefaultBuildURL(t *testing.T) {
	tests := []struct {
		name, base string
		want       string // the request's URL; "" for an error
	}{
		{"plain", "https://x/v1", "https://x/v1/chat/completions"},
		{"trailing slash", "https://x/v1/", "https://x/v1/chat/completions"},
		{"no path", "https://x", "https://x/chat/completions"},
		{"query kept", "https://x/openai/v1?api-version=2024-10-21", "https://x/openai/v1/chat/completions?api-version=2024-10-21"},
		{"query after a trailing slash", "https://x/v1/?a=1&b=2", "https://x/v1/chat/completions?a=1&b=2"},
		{"escaped path", "https://x/my%20gw/v1", "https://x/my%20gw/v1/chat/completions"},
		{"user info refused", "https://user:pw@x/v1", ""},
		{"user refused", "https://user@x/v1", ""},
	}
	body := []byte(`{"model":"m","messages":[],"stream":true}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := route.Deployment{Provider: "p", Model: "m", BaseURL: tt.base, APIKey: "sk-1"}
			req, err := executor.DefaultBuild(context.Background(), d, body)
			if tt.want == "" {
				require.Error(t, err)
				assert.NotContains(t, err.Error(), "pw", "the error must not repeat the password")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, req.URL.String())
		})
	}
}

// TestDefaultBuildQueryReachesServer sends a built request to a loopback
// server: the path and every query parameter arrive as configured.
func TestDefaultBuildQueryReachesServer(t *testing.T) {
	var path, version string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, version = r.URL.Path, r.URL.Query().Get("api-version")
	}))
	defer srv.Close()
	d := route.Deployment{Provider: "p", Model: "m", BaseURL: srv.URL + "/openai/v1?api-version=2024-10-21"}
	require.NoError(t, d.Validate())
	req, err := executor.DefaultBuild(context.Background(), d, []byte(`{"model":"m","messages":[]}`))
	require.NoError(t, err)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, "/openai/v1/chat/completions", path)
	assert.Equal(t, "2024-10-21", version)
}
