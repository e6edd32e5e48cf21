package replay

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHosts checks that each host reaches its own Handler and that another
// host is an error, with the request body closed.
func TestHosts(t *testing.T) {
	hc := &http.Client{Transport: Hosts{
		"a.test": NewHandler(map[string]Script{"m": &Profile{OutputTokens: 2}}),
		"b.test": NewHandler(map[string]Script{"m": &Profile{OutputTokens: 3}}),
	}}
	post := func(host string) (*http.Response, error) {
		return hc.Post("http://"+host+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	}
	for host, chunks := range map[string]int{"a.test": 2, "b.test": 3} {
		res, err := post(host)
		require.NoError(t, err, host)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		assert.Equal(t, chunks, strings.Count(string(body), `"content":"w`), "content chunks from %s", host)
	}
	_, err := post("c.test")
	assert.ErrorContains(t, err, `no Handler for host "c.test"`)
}
