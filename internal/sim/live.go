package sim

import (
	"bytes"
	"context"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// callInfo is what a live deployment needs to know of the call whose stream
// it paces; the runner puts it in the call's context.
type callInfo struct {
	prompt, out int
	claim       *claim // the runner's pick, released when the call reaches it
}

// claim counts one call chosen for a deployment among that deployment's
// streams from the moment it is chosen until its request reaches the
// deployment (or the call ends without reaching it), so that a call chosen
// at the same virtual instant sees it (trueScores): without it, callers
// woken together all see the deployment idle, pick it together, and what
// the oracle scores depends on the order the goroutines ran in.
type claim struct {
	d    *simDeployment
	once sync.Once
}

// release stops counting the claim; only its first call does so.
func (c *claim) release() { c.once.Do(func() { c.d.claimed.Add(-1) }) }

type callInfoKey struct{}

// pace wraps the body of one of d's streams so that its content chunks
// arrive at d's speed as it is at each chunk (Scenario.Live). replay writes
// the answer with no gap between chunks (decide sets TPS 0 in live mode);
// liveBody releases every content event after the first only after its
// tokens' generation time at the rate truth gives at that moment, with the
// deployment's streams at that moment, times a noise drawn once per stream.
func (d *simDeployment) pace(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	info, _ := ctx.Value(callInfoKey{}).(callInfo)
	noise := 1.0
	if d.spec.Sigma > 0 {
		r := rand.New(rand.NewPCG(d.seed, d.streams.Add(1)|1<<62))
		noise = math.Exp(d.spec.Sigma * r.NormFloat64())
	}
	return &liveBody{rc: rc, d: d, prompt: info.prompt, per: d.perChunk(info.out), noise: noise, closed: make(chan struct{})}
}

// liveBody is a stream paced chunk by chunk. Read is called by one reader;
// Close may come from another goroutine and ends a pending wait.
type liveBody struct {
	rc     io.ReadCloser
	d      *simDeployment
	prompt int
	per    int
	noise  float64

	buf      []byte // read from rc, not yet split into events
	out      []byte // the event being returned
	err      error  // rc's terminal error, returned once buf is drained
	contents int    // content events released
	timer    *time.Timer

	once   sync.Once
	closed chan struct{}
}

// contentMark starts the delta of a content chunk with text in it.
var contentMark = []byte(`"content":"`)

// hasContent reports whether the SSE event carries output text.
func hasContent(ev []byte) bool {
	i := bytes.Index(ev, contentMark)
	return i >= 0 && i+len(contentMark) < len(ev) && ev[i+len(contentMark)] != '"'
}

func (b *liveBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if i := bytes.Index(b.buf, []byte("\n\n")); i >= 0 {
			ev := b.buf[:i+2]
			b.buf = b.buf[i+2:]
			if hasContent(ev) {
				if b.contents > 0 && !b.wait() {
					return 0, io.ErrClosedPipe
				}
				b.contents++
			}
			b.out = ev
			break
		}
		if b.err != nil {
			if len(b.buf) > 0 { // a partial event before a cut
				b.out, b.buf = b.buf, nil
				break
			}
			return 0, b.err
		}
		var chunk [4 << 10]byte
		n, err := b.rc.Read(chunk[:])
		b.buf = append(b.buf, chunk[:n]...)
		b.err = err
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// wait sleeps one chunk's generation time at the deployment's speed now; it
// reports false when the body was closed meanwhile.
func (b *liveBody) wait() bool {
	d := b.d
	now := time.Now()
	tps := d.truth(now.Sub(d.start), d.inFlight.Load(), b.prompt).tps * b.noise
	if !(tps > 0) {
		return true
	}
	gap := time.Duration(float64(b.per) / tps * float64(time.Second))
	if b.timer == nil {
		b.timer = time.NewTimer(gap)
	} else {
		b.timer.Reset(gap)
	}
	select {
	case <-b.timer.C:
		return true
	case <-b.closed:
		b.timer.Stop()
		return false
	}
}

func (b *liveBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return b.rc.Close()
}
