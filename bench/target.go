package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
	"github.com/tpsroute/tpsroute/tps"
)

// target sends one request and measures it.
type target interface {
	// name is the Result.Target of every request it sends.
	name() string
	// do sends p, measures it from sent, and fills r (all but the schedule).
	do(ctx context.Context, p *Prompt, sent time.Time, r *Result)
}

// slot is what the probe transport learns about one call's attempts.
type slot struct {
	mu     sync.Mutex
	called bool  // an attempt reached the wire
	status int   // the last attempt's HTTP status
	err    error // the last attempt's transport error
}

type slotKey struct{}

// probe wraps the HTTP transport under the Client and notes, per call, whether
// an attempt was sent, its status and its transport error: the Client's
// Transport answers failures as HTTP error bodies, and the probe lets the
// harness tell a skipped deployment (breaker open, cooling down, no budget)
// from a connection failure without reading error strings.
type probe struct{ next http.RoundTripper }

func (p *probe) RoundTrip(req *http.Request) (*http.Response, error) {
	s, _ := req.Context().Value(slotKey{}).(*slot)
	res, err := p.next.RoundTrip(req)
	if s != nil {
		s.mu.Lock()
		s.called = true
		s.err = err
		if res != nil {
			s.status = res.StatusCode
		}
		s.mu.Unlock()
	}
	return res, err
}

// pinned sends through Client.Transport, pinned to one deployment without
// failover, and times the body with its own tps.Tap: the same measurement the
// router records, without decoding chunks into Go values, so the harness
// stays cheap at thousands of streams per second.
type pinned struct {
	rt    http.RoundTripper
	pool  *sync.Pool // of *[]byte drain buffers
	key   measure.Key
	label string
	model string
	opts  []tpsroute.CallOption
}

func newPinned(c *tpsroute.Client, d route.Deployment, model string) *pinned {
	k := d.Key()
	return &pinned{
		rt:    c.Transport(),
		pool:  &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }},
		key:   k,
		label: d.Provider + "/" + d.Region + "/" + k.Model,
		model: model,
		opts:  []tpsroute.CallOption{tpsroute.WithPin(d.Provider, d.Region), tpsroute.WithoutFallback()},
	}
}

func (t *pinned) name() string { return t.label }

const benchURL = "http://tpsbench.invalid/v1/chat/completions"

func (t *pinned) do(ctx context.Context, p *Prompt, sent time.Time, r *Result) {
	sl := &slot{}
	ctx = tpsroute.ContextWithOptions(context.WithValue(ctx, slotKey{}, sl), t.opts...)
	body := appendBody(make([]byte, 0, 512), t.model, p)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, benchURL, bytes.NewReader(body))
	if err != nil {
		r.setError(err, "other", tps.PhaseConnect)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := t.rt.RoundTrip(req)
	if err != nil {
		r.fill(tps.Sample{Start: sent}, sent)
		r.setError(err, classify(err, 0, "", tps.PhaseConnect), tps.PhaseConnect)
		return
	}
	if res.StatusCode != http.StatusOK {
		r.fill(tps.Sample{Start: sent}, sent)
		r.failedStatus(res, sl)
		return
	}
	var s tps.Sample
	tap := tps.NewTap(res.Body, sent, func(x tps.Sample) { s = x })
	buf := t.pool.Get().(*[]byte)
	for {
		if _, err := tap.Read(*buf); err != nil {
			break
		}
	}
	t.pool.Put(buf)
	_ = tap.Close()
	r.Deployment = t.key
	r.Attempts = 1
	r.fill(s, sent)
	if s.Err != nil {
		r.setError(s.Err, classify(s.Err, 0, "", s.ErrPhase), s.ErrPhase)
	}
}

// failedStatus records an error answer of the Client's Transport.
func (r *Result) failedStatus(res *http.Response, sl *slot) {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	msg := e.Error.Message
	if msg == "" {
		msg = string(b)
	}
	sl.mu.Lock()
	called, status, terr := sl.called, sl.status, sl.err
	sl.mu.Unlock()
	err := fmt.Errorf("bench: HTTP %d: %s", res.StatusCode, msg)
	switch {
	case !called && res.StatusCode == http.StatusNotFound:
		r.setError(err, "no_deployment", tps.PhaseNone)
	case !called:
		r.setError(err, "skipped", tps.PhaseNone)
	case terr != nil:
		r.setError(err, classify(terr, 0, "", tps.PhaseConnect), tps.PhaseConnect)
	default:
		if status == 0 {
			status = res.StatusCode
		}
		phase := tps.PhaseHeaders
		if status == http.StatusOK {
			phase = tps.PhaseFirstToken // failed before the commit point
		}
		r.setError(err, classify(nil, status, e.Error.Code, phase), phase)
	}
}

func (r *Result) setError(err error, class string, phase tps.Phase) {
	if errors.Is(err, context.Canceled) {
		class = "canceled"
	}
	r.Error, r.ErrorClass, r.ErrorPhase = err.Error(), class, phaseName(phase)
}

// routed sends through Client.Chat.Completions.NewStreaming with the router
// free to choose and fail over, as production traffic would.
type routed struct {
	c     *tpsroute.Client
	model string
}

func (t *routed) name() string { return "routed" }

func (t *routed) do(ctx context.Context, p *Prompt, sent time.Time, r *Result) {
	params := openai.ChatCompletionNewParams{Model: t.model}
	for _, m := range p.Messages {
		switch m.Role {
		case "system":
			params.Messages = append(params.Messages, openai.SystemMessage(m.Content))
		case "developer":
			params.Messages = append(params.Messages, openai.DeveloperMessage(m.Content))
		case "assistant":
			params.Messages = append(params.Messages, openai.AssistantMessage(m.Content))
		default:
			params.Messages = append(params.Messages, openai.UserMessage(m.Content))
		}
	}
	if p.MaxTokens > 0 {
		params.MaxTokens = openai.Int(int64(p.MaxTokens))
	}
	st := t.c.Chat.Completions.NewStreaming(ctx, params)
	for st.Next() {
	}
	_ = st.Close()
	s := st.Sample()
	if s.Start.IsZero() {
		s.Start = sent
	}
	r.Deployment = st.Deployment().Key()
	r.Attempts = len(st.Attempts())
	r.fill(s, sent)
	if err := st.Err(); err != nil {
		phase := s.ErrPhase
		if phase == tps.PhaseNone {
			phase = tps.PhaseConnect
		}
		r.setError(err, classify(err, 0, "", phase), phase)
	}
}
