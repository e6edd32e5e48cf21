package tpsroute

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// TestMidStreamCutSameErrorEitherDoor is issue 13 point 9 through the
// Client: a stream cut after output is ErrMidStream under Chat.Completions.New
// as under NewStreaming, with the same attempt count.
func TestMidStreamCutSameErrorEitherDoor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		cut := map[string]replay.Script{"m": replay.WithFaults(&replay.Profile{OutputTokens: 12}, replay.CutAfter(4))}
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f},
			Deployments: []route.Deployment{dep("a", "", "m", f.add("a", cut))}})

		_, errNew := c.Chat.Completions.New(context.Background(), userParams("m", "hi"))
		s, _, errStream := streamOnce(t, c, "m")
		for name, err := range map[string]error{"New": errNew, "NewStreaming": errStream} {
			require.Error(t, err, name)
			assert.ErrorIs(t, err, fallback.ErrMidStream, name)
			var fe *fallback.Error
			require.True(t, errors.As(err, &fe), name)
			last, _ := fe.Last()
			assert.Equal(t, fallback.ClassMidStream, last.Class, name)
			assert.Contains(t, fe.Error(), "fallback: 1 attempt (", name) // then why it was not continued
		}
		assert.Equal(t, 1, s.Outcome().AttemptCount, "the stream's count agrees with its error's")
	})
}

// TestContextLengthNextListedModel is issue 13 point 6 through the Client: a
// context_length_exceeded on a wildcard deployment (window unknown) moves on
// to the next model the caller listed with WithModels.
func TestContextLengthNextListedModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newMemFleet()
		wild := dep("w", "", "*", f.add("w", map[string]replay.Script{
			"big": replay.WithFaults(&replay.Profile{OutputTokens: 3}, replay.ContextLengthExceeded()),
		}))
		other := dep("o", "", "m2", f.add("o", map[string]replay.Script{"m2": &replay.Profile{OutputTokens: 3}}))
		c := mustNew(t, Config{HTTPClient: &http.Client{Transport: f}, Deployments: []route.Deployment{wild, other}})
		s, text, err := streamOnce(t, c, "big", WithModels("m2"))
		require.NoError(t, err)
		assert.Equal(t, replay.Text(3), text)
		assert.Equal(t, "m2", s.Outcome().Deployment.Model, "the next listed model answered")
	})
}

// refused fails every request as a refused connection: every provider offline.
