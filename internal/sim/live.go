package sim

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// callInfo is what a live deployment needs to know of the call whose stream
// it paces; the runner puts it in the call's context.
type callInfo struct {
	prompt, out int
	claim       *claim         // the runner's pick, released when the call reaches it
	seq         uint64         // the call's number in the run
	requests    *atomic.Uint64 // the call's requests so far, numbering each; nil unless Workload.Keyed
}

// simCallHeader carries a request's call number, its request number within
// the call and the deployment's streams with it, from the fleet's
// RoundTrip to decide (replay.Call.Header), so that the deployment's draws
// and load are the call's, not those of the order requests arrived in.
const simCallHeader = "X-Sim-Call"

// requestKey is one request of a call as simCallHeader carries it.
type requestKey struct {
	seq, n  uint64 // the call's number, the request's number within it (from 1)
	streams int64  // the deployment's streams with this one
}

// String formats k for simCallHeader.
func (k requestKey) String() string {
	return strconv.FormatUint(k.seq, 10) + " " + strconv.FormatUint(k.n, 10) + " " + strconv.FormatInt(k.streams, 10)
}

// parseRequestKey reads a simCallHeader value.
func parseRequestKey(v string) (requestKey, bool) {
	var k requestKey
	f := strings.Fields(v)
	if len(f) != 3 {
		return k, false
	}
	var err1, err2, err3 error
	k.seq, err1 = strconv.ParseUint(f[0], 10, 64)
	k.n, err2 = strconv.ParseUint(f[1], 10, 64)
	k.streams, err3 = strconv.ParseInt(f[2], 10, 64)
	return k, err1 == nil && err2 == nil && err3 == nil
}

// rand returns the random source of the request's draws at a deployment
// seeded with seed; stream separates the draws of decide and pace. The seed
// is mixed whole: PCGs seeded seed^mix(seq) for deployments whose seeds
// differ by a constant gave one call correlated draws at every deployment,
// enough to turn a latency baseline onto the slowest one (cost-slo).
func (k requestKey) rand(seed, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(mix(seed^mix(k.seq)), k.n<<8|stream))
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
//
// info is the call's (zero when the request carries none); key is the
// request's with Workload.Keyed, nil without, when the noise is drawn by
// the order the deployment's streams began in.
func (d *simDeployment) pace(info callInfo, key *requestKey, rc io.ReadCloser) io.ReadCloser {
	noise := 1.0
	if d.spec.Sigma > 0 {
		var r *rand.Rand
		if key != nil {
			r = key.rand(d.seed, 2)
		} else {
			r = rand.New(rand.NewPCG(d.seed, d.streams.Add(1)|1<<62))
		}
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

	raw      []byte // buf's backing array, reused by every read
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
		// The unsplit rest moves to the front of the one backing array,
		// and rc reads after it: no buffer per read.
		if b.buf = append(b.raw[:0], b.buf...); cap(b.buf)-len(b.buf) < 1<<10 {
			b.buf = slices.Grow(b.buf, 4<<10)
		}
		n, err := b.rc.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf = b.buf[:len(b.buf)+n]
		b.raw = b.buf[:0]
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
