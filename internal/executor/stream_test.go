package executor_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
)

// segments is a response body whose Reads return its segments one by one,
// as a network delivers what a provider wrote in bursts.
type segments struct{ segs []string }

func (s *segments) Read(p []byte) (int, error) {
	if len(s.segs) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.segs[0])
	if s.segs[0] = s.segs[0][n:]; s.segs[0] == "" {
		s.segs = s.segs[1:]
	}
	return n, nil
}

func (s *segments) Close() error { return nil }

// segmentTransport answers every request with a 200 event stream of segs.
type segmentTransport []string

func (t segmentTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    &segments{segs: append([]string(nil), t...)},
		Request: req,
	}, nil
}

func sseWord(w string) string {
	return `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + w + `"},"finish_reason":null}]}` + "\n\n"
}

// TestReadReleasesEveryBufferedEvent: once the commit point is passed, a Read
// returns every complete event that has already arrived (up to len(p)), not
// one per Read, and never a partial one: a relay that writes and flushes once
// per Read then makes one write per burst from the provider, not per event.
func TestReadReleasesEveryBufferedEvent(t *testing.T) {
	stop := `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"
	done := "data: [DONE]\n\n"
	partial := `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"c `
	tests := []struct {
		name  string
		segs  []string
		pLen  int
		reads []string // what each Read returns, in order, to the end
	}{
		{
			name:  "three_events_in_one_burst",
			segs:  []string{sseWord("a "), sseWord("b ") + sseWord("c ") + sseWord("d "), stop + done},
			pLen:  32 << 10,
			reads: []string{sseWord("a "), sseWord("b ") + sseWord("c ") + sseWord("d "), stop + done},
		},
		{
			name: "partial_event_held_back",
			segs: []string{sseWord("a "), sseWord("b ") + partial, `"},"finish_reason":null}]}` + "\n\n" + stop + done},
			pLen: 32 << 10,
			reads: []string{sseWord("a "), sseWord("b "),
				partial + `"},"finish_reason":null}]}` + "\n\n" + stop + done},
		},
		{
			name:  "small_p_takes_what_fits",
			segs:  []string{sseWord("a "), sseWord("b ") + sseWord("c "), stop + done},
			pLen:  len(sseWord("b ")) + 10,
			reads: []string{sseWord("a "), sseWord("b ") + sseWord("c ")[:10], sseWord("c ")[10:], stop + done},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := executor.New(fallback.Options{}, executor.Hooks{Transport: segmentTransport(tt.segs)})
			res, err := ex.Do(context.Background(), planOf(dep("a", "a-m")), executor.Call{Body: []byte(reqBody), Stream: true})
			require.NoError(t, err)
			defer res.Body.Close()
			p := make([]byte, tt.pLen)
			var got []string
			for {
				n, err := res.Body.Read(p)
				if n > 0 {
					got = append(got, string(p[:n]))
				}
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
			}
			assert.Equal(t, tt.reads, got)
			assert.Equal(t, strings.Join(tt.segs, ""), strings.Join(got, ""), "every byte, in order")
			assert.NoError(t, res.Sample().Err)
		})
	}
}
