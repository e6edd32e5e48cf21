package tpsroute

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

func TestSmoke(t *testing.T) {
	f := newTCPFleet(t)
	a := f.add("a", map[string]replay.Script{"m-a": &replay.Profile{OutputTokens: 20}})
	c := mustNew(t, Config{HTTPClient: f.client, Deployments: []route.Deployment{
		{Provider: "a", Model: "m", ProviderModel: "m-a", BaseURL: a, APIKey: "ka", Capabilities: route.Capabilities{IncludeUsage: true}},
	}})
	s, text, err := streamOnce(t, c, "m")
	require.NoError(t, err)
	assert.Equal(t, replay.Text(20), text)
	assert.Equal(t, "a", s.Deployment().Provider)
	assert.EqualValues(t, 20, s.Sample().OutputTokens)
	got, err := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
	require.NoError(t, err)
	assert.Equal(t, replay.Text(20), got.Choices[0].Message.Content)
	assert.EqualValues(t, 20, got.Usage.CompletionTokens)
}
