package fleet

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// pipeConn is a net.Conn whose reads return the chunks given, in order.
type pipeConn struct {
	net.Conn
	chunks [][]byte
}

func (p *pipeConn) Read(b []byte) (int, error) {
	if len(p.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.chunks[0])
	if p.chunks[0] = p.chunks[0][n:]; len(p.chunks[0]) == 0 {
		p.chunks = p.chunks[1:]
	}
	return n, nil
}

func (p *pipeConn) Write(b []byte) (int, error) { return len(b), nil }
func (p *pipeConn) Close() error                { return nil }

// readAll reads replies through a replyLimiter after one write, the input
// split into chunks of size bytes.
func readAll(in string, size int) error {
	var chunks [][]byte
	for b := []byte(in); len(b) > 0; {
		n := min(size, len(b))
		chunks = append(chunks, b[:n])
		b = b[n:]
	}
	c := &replyLimiter{Conn: &pipeConn{chunks: chunks}}
	_, _ = c.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	_, err := io.Copy(io.Discard, c)
	return err
}

func TestReplyLimiter(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	for _, tc := range []struct {
		name, in string
		want     error // nil: accepted
	}{
		{"status, error, integer", "+OK\r\n-ERR no\r\n:42\r\n:-1\r\n", nil},
		{"bulk and null bulk", "$5\r\nhello\r\n$-1\r\n$0\r\n\r\n", nil},
		{"nested arrays and null array", "*2\r\n*1\r\n$1\r\na\r\n*-1\r\n", nil},
		{"a 1 MiB bulk string", "$1048576\r\n" + big + "\r\n", nil},
		{"a bulk string past the budget", "$67108865\r\n", ErrReplyTooLarge},
		{"two billion elements", "*2000000000\r\n", ErrReplyTooLarge},
		{"two billion bytes", "$2000000000\r\n", ErrReplyTooLarge},
		{"many headers past the budget together", strings.Repeat("*500000\r\n", 3), ErrReplyTooLarge},
		{"a length of 19 digits", "*1000000000000000000\r\n", ErrReplyTooLarge},
		{"a line without an end", "+" + strings.Repeat("y", 70<<10), ErrReplyTooLarge},
		{"RESP3 map", "%1\r\n", errNotRESP2},
		{"negative length", "$-2\r\n", errNotRESP2},
		{"not a number", "*1x\r\n", errNotRESP2},
		{"empty length", "$\r\n", errNotRESP2},
		{"HTTP", "HTTP/1.1 400 Bad Request\r\n", errNotRESP2},
	} {
		for _, size := range []int{1, 7, 1 << 16} {
			err := readAll(tc.in, size)
			if tc.want == nil {
				assert.NoError(t, err, "%s, reads of %d bytes", tc.name, size)
			} else {
				assert.ErrorIs(t, err, tc.want, "%s, reads of %d bytes", tc.name, size)
			}
		}
	}
	t.Run("each write refills the budget", func(t *testing.T) {
		reply := "*600000\r\n" // 38.4 MB of elements: one fits, two do not
		c := &replyLimiter{Conn: &pipeConn{chunks: [][]byte{[]byte(reply), []byte(reply)}}}
		buf := make([]byte, 64)
		_, _ = c.Write(nil)
		_, err := c.Read(buf)
		require.NoError(t, err)
		_, _ = c.Write(nil)
		_, err = c.Read(buf)
		require.NoError(t, err)
		c = &replyLimiter{Conn: &pipeConn{chunks: [][]byte{[]byte(reply), []byte(reply)}}}
		_, _ = c.Write(nil)
		_, err = c.Read(buf)
		require.NoError(t, err)
		_, err = c.Read(buf)
		require.ErrorIs(t, err, ErrReplyTooLarge)
		_, err = c.Read(buf)
		require.ErrorIs(t, err, ErrReplyTooLarge, "the error sticks")
	})
}

// hostileRedis listens on 127.0.0.1 and answers every read with reply.
func hostileRedis(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					if _, err := c.Write(reply); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// TestHostileRedisBounded: an endpoint that answers every command with a
// header declaring two billion elements or bytes, or with bytes that are not
// RESP2, costs a round, not gigabytes (go-redis allocated 4.9 GiB in 4 s for
// "*2000000000").
func TestHostileRedisBounded(t *testing.T) {
	for _, tc := range []struct{ name, reply string }{
		{"two billion elements", "*2000000000\r\n"},
		{"twenty million elements", "*20000000\r\n"},
		{"two billion bytes", "$2000000000\r\n"},
		{"HTTP", "HTTP/1.1 400 Bad Request\r\n\r\n"},
		{"a line without an end", "+" + strings.Repeat("z", 1<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newReplica(t, "redis://"+hostileRedis(t, []byte(tc.reply)), "r1")
			r.reg.RecordAt(t0, slow.Key(), sample(time.Second, 50))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := range 3 {
				r.round(t0.Add(time.Duration(i) * time.Second))
			}
			runtime.ReadMemStats(&after)
			st := r.f.Status(t0)
			assert.False(t, st.Connected)
			assert.Equal(t, int64(3), st.Failures)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated in three rounds")
			assert.Contains(t, r.logs.String(), "Redis unreachable")
		})
	}
}

// TestGarbageRedisFailsClosed: a Client whose fleet's Redis answers garbage
// routes on its own statistics: every call succeeds, is measured locally,
// and the fleet reports itself disconnected.
func TestGarbageRedisFailsClosed(t *testing.T) {
	h := replay.NewHandler(map[string]replay.Script{"m": &replay.Profile{OutputTokens: 5}})
	f, err := New(Options{URL: "redis://" + hostileRedis(t, []byte("*2000000000\r\n")), Name: "test", Sync: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	c, err := tpsroute.New(tpsroute.Config{
		HTTPClient:  &http.Client{Transport: h.Transport()},
		Deployments: []route.Deployment{{Provider: "a", Model: "m", BaseURL: "http://a.test/v1", Limits: route.Limits{RPM: 6000}}},
		Fleet:       f,
	})
	require.NoError(t, err)
	defer c.Close()
	for range 20 {
		resp, err := c.Do(context.Background(), []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.True(t, bytes.Contains(b, []byte(`"content"`)), string(b))
	}
	st, ok := c.Stats().Lookup(measure.Key{Provider: "a", Model: "m"})
	require.True(t, ok)
	assert.Equal(t, int64(20), st.Requests, "measured locally")
	for deadline := time.Now().Add(5 * time.Second); f.Status(time.Now()).Failures == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	fs := f.Status(time.Now())
	assert.False(t, fs.Connected)
	assert.Positive(t, fs.Failures)
}

// TestRealisticRepliesPass: replies of the size a fleet really exchanges
// (256 busy keys, the gateway's benchmark shape) pass the limiter, through
// miniredis.
func TestRealisticRepliesPass(t *testing.T) {
	mr := miniredis.RunT(t)
	url := "redis://" + mr.Addr()
	r1, r2 := newReplicaIn(t, url, "test", "r1"), newReplicaIn(t, url, "test", "r2")
	now := t0
	for i := range 40 { // 40 rounds of 256 keys each
		now = now.Add(time.Second)
		for k := range 256 {
			key := measure.Key{Provider: "p" + string(rune('a'+k%26)) + string(rune('a'+k/26)), Model: "m"}
			r1.reg.RecordAt(now, key, sample(time.Duration(100+i)*time.Millisecond, 50))
		}
		r1.round(now)
	}
	r2.round(now)
	assert.True(t, r2.f.Status(now).Connected)
	assert.Len(t, r2.reg.Snapshot().Keys(), 256, "every key merged")
}
