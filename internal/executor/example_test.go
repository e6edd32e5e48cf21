package executor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute/fallback"
	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/payload"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// text decodes the output text of an SSE body, and returns the error that
// ended it (nil for a clean end).
func text(body io.ReadCloser) (string, error) {
	defer body.Close()
	var out []byte
	tap := tps.NewTap(io.NopCloser(body), time.Now(), nil, withObserver(func(_ time.Time, c *payload.Chunk) {
		out = c.AppendText(out)
	}))
	_, err := io.Copy(io.Discard, tap)
	return string(out), err
}

// The primary answers 503; the call fails over to the secondary invisibly.
func Example() {
	h := replay.NewHandler(map[string]replay.Script{
		"primary-model":   replay.WithFaults(&replay.Profile{OutputTokens: 4}, replay.Status(http.StatusServiceUnavailable, "", nil)),
		"secondary-model": &replay.Profile{OutputTokens: 4},
	})
	ex := executor.New(fallback.Options{}, executor.Hooks{Transport: h.Transport()})
	plan := route.Plan{Deployments: []route.Candidate{
		{Deployment: &route.Deployment{Provider: "primary", Model: "m", ProviderModel: "primary-model", BaseURL: "http://primary.invalid/v1", APIKey: "sk-1"}},
		{Deployment: &route.Deployment{Provider: "secondary", Model: "m", ProviderModel: "secondary-model", BaseURL: "http://secondary.invalid/v1", APIKey: "sk-2"}},
	}}
	res, err := ex.Do(context.Background(), plan, executor.Call{
		Body:   []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`),
		Stream: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := text(res.Body)
	fmt.Printf("%q %v\n", out, err)
	fmt.Println("answered by", res.Deployment().Provider)
	for _, a := range res.Attempts() {
		fmt.Println(a.Key.Provider, a.Class, a.Status)
	}
	// Output:
	// "w0 w1 w2 w3 " <nil>
	// answered by secondary
	// primary next 503
	// secondary ok 200
}

// A stream cut after the commit point ends with a mid-stream error, never a
// clean end of stream.
func ExampleResult_midStream() {
	h := replay.NewHandler(map[string]replay.Script{
		"model": replay.WithFaults(&replay.Profile{OutputTokens: 10}, replay.CutAfter(4)),
	})
	ex := executor.New(fallback.Options{}, executor.Hooks{Transport: h.Transport()})
	plan := route.Plan{Deployments: []route.Candidate{
		{Deployment: &route.Deployment{Provider: "p", Model: "model", BaseURL: "http://p.invalid/v1"}},
	}}
	res, err := ex.Do(context.Background(), plan, executor.Call{Body: []byte(`{"model":"model","messages":[]}`), Stream: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, err := text(res.Body)
	var fe *fallback.Error
	if errors.As(err, &fe) {
		last, _ := fe.Last()
		fmt.Println(strings.TrimSpace(out))
		fmt.Println(errors.Is(err, fallback.ErrMidStream), fe.Phase() == tps.PhaseMidStream, last.Key.Provider)
	}
	// Output:
	// w0 w1 w2
	// true true p
}

// Status implements internal/picker's Health: a deployment that answered 401 is open and
// cooling down.
func ExampleExecutor_Status() {
	h := replay.NewHandler(map[string]replay.Script{
		"model": replay.WithFaults(&replay.Profile{}, replay.Unauthorized()),
	})
	ex := executor.New(fallback.Options{}, executor.Hooks{Transport: h.Transport()})
	d := route.Deployment{Provider: "p", Model: "model", BaseURL: "http://p.invalid/v1", APIKey: "sk-wrong"}
	_, err := ex.Do(context.Background(), route.Plan{Deployments: []route.Candidate{{Deployment: &d}}},
		executor.Call{Body: []byte(`{"model":"model","messages":[]}`)})
	var api *openai.Error
	if errors.As(err, &api) {
		fmt.Println(api.StatusCode, strings.Contains(err.Error(), "sk-wrong"))
	}
	st := ex.Status(d.Key(), time.Now())
	fmt.Println(st.Breaker == route.BreakerOpen, st.CoolingUntil.After(time.Now()))
	// Output:
	// 401 false
	// true true
}
