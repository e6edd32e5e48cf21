package tpsroute

import (
	"context"
	"flag"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tpsroute/tpsroute/route"
)

// BenchmarkNew1000 compares the client CPU of one non-streaming call whose
// answer is 1,000 tokens, from a replay server in another process that
// answers as providers do: one chat.completion JSON body when the request
// does not stream (plain openai-go's call), SSE when it does (every routed
// attempt streams underneath). The doors are plain openai-go New, the
// routed Client's New, Do with "stream": false read to its end, openai-go
// New over Client.Transport, and the Client's New WithPlainUpstream, whose
// attempt is a plain call too. Each iteration runs a block of newBlock
// calls of each door in turn, after a garbage collection outside the count,
// so that one door's garbage is not collected on another's time. The order
// turns by one door each iteration, so that each door follows each other
// equally often: what the runtime still does after the collection
// (returning memory to the system) is counted in the next block, and in a
// fixed order the Transport's median read 1.82 and 1.87 after Do against
// 1.73 and 1.56 right after plain openai-go (two pairs of runs). Each door
// reports its CPU µs per call (its own collections included), its ratio to
// plain openai-go over the whole run ("door/plain") and the median of its
// blocks' ratios to the plain block of the same iteration
// ("door/plain-median"), which a slow spell of a few blocks does
// not move. allocs/op and B/op are those of one iteration: newBlock calls
// of every door run.
//
// Each block runs under the profiler label door=<name>: with -cpuprofile,
// `go tool pprof -tagfocus door=^transport$` shows one door's blocks alone,
// without the collections between them. -new.doors=plain,transport (test
// flag) runs only the named doors, in that order; the ratios need plain.
func BenchmarkNew1000(b *testing.B) {
	url := benchServer(b)
	runDoors(b, selectDoors(b, nonStreamDoors(b, url, "m", benchChunks), *newDoors))
}

// runDoors runs BenchmarkNew1000's blocks of doors, and
// BenchmarkResponsesNew1000's: newBlock calls of each door per block, the
// order turned by one door each iteration, a garbage collection before each
// block outside the count; it reports each door's CPU µs a call and, when
// doors[0] is "plain", each other door's ratio to it over the run and the
// median of its per-iteration ratios. Each block runs under the profiler
// label door=<name>.
func runDoors(b *testing.B, doors []door) {
	for _, d := range doors { // warm connections and statistics
		d.call()
	}
	cpu := make([]time.Duration, len(doors))
	block := make([]time.Duration, len(doors))
	labels := make([]pprof.LabelSet, len(doors)) // door=name, for profiles
	for i, d := range doors {
		labels[i] = pprof.Labels("door", d.name)
	}
	ratios := make([][]float64, len(doors))
	b.ReportAllocs()
	b.ResetTimer()
	for iter := 0; b.Loop(); iter++ {
		for k := range doors {
			i := (k + iter) % len(doors) // each door follows each other in turn
			d := doors[i]
			b.StopTimer()
			runtime.GC()
			b.StartTimer()
			t0 := cpuTime()
			pprof.Do(context.Background(), labels[i], func(context.Context) {
				for range newBlock {
					d.call()
				}
			})
			block[i] = cpuTime() - t0
			cpu[i] += block[i]
		}
		if doors[0].name == "plain" {
			for i := 1; i < len(doors); i++ {
				ratios[i] = append(ratios[i], float64(block[i])/float64(block[0]))
			}
		}
	}
	b.StopTimer()
	n := float64(b.N * newBlock)
	for i, d := range doors {
		b.ReportMetric(float64(cpu[i].Microseconds())/n, d.name+"-cpu-µs/call")
		if i > 0 && doors[0].name == "plain" {
			b.ReportMetric(float64(cpu[i])/float64(cpu[0]), d.name+"/plain")
			b.ReportMetric(medianOf(ratios[i]), d.name+"/plain-median")
		}
	}
}

// newDoors is BenchmarkNew1000's -new.doors: the doors to run, comma
// separated; empty means all.
var newDoors = flag.String("new.doors", "", "BenchmarkNew1000: the doors to run, comma separated (plain, client, do, transport, plainup); empty means all")

// selectDoors returns the doors of all named in list (comma separated), in
// list's order; all of them when list is empty.
func selectDoors(b *testing.B, all []door, list string) []door {
	if list == "" {
		return all
	}
	var out []door
	for name := range strings.SplitSeq(list, ",") {
		i := slices.IndexFunc(all, func(d door) bool { return d.name == name })
		if i < 0 {
			b.Fatalf("-new.doors: no door %q", name)
		}
		out = append(out, all[i])
	}
	return out
}

// newBlock is how many calls of one door BenchmarkNew1000 makes in a row.
const newBlock = 4

// door is one way of making a non-streaming call.
type door struct {
	name string
	call func()
}

// nonStreamDoors returns the four doors of a non-streaming call to the
// logical model m, served at url, whose answer has chunks tokens: plain
// openai-go New, the Client's New, Do with "stream": false and openai-go
// New over the Transport. Each checks the answer it got.
func nonStreamDoors(b *testing.B, url, m string, chunks int) []door {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	plain := openai.NewClient(option.WithBaseURL(url), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: tr}), option.WithMaxRetries(0))
	// The routed doors use the Client's own upstream transport, as a Config
	// without HTTPClient does (a 64 KiB read buffer per connection); plain
	// openai-go uses net/http's defaults. Each is measured as it ships.
	c, err := New(Config{Deployments: []route.Deployment{
		{Provider: "local", Model: m, BaseURL: url, APIKey: "k"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	viaTransport := openai.NewClient(option.WithBaseURL("http://caller.invalid/v1"), option.WithAPIKey("k"),
		option.WithHTTPClient(&http.Client{Transport: c.Transport()}), option.WithMaxRetries(0))
	params := userParams(m, "hi")
	body := []byte(`{"model":"` + m + `","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	ctx := context.Background()
	check := func(out *openai.ChatCompletion, err error) {
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Choices) != 1 || out.Choices[0].FinishReason != "stop" || out.Usage.CompletionTokens != int64(chunks) {
			b.Fatalf("answer of %d choices, usage %+v", len(out.Choices), out.Usage)
		}
	}
	buf := make([]byte, 64<<10)
	doors := []door{
		{name: "plain", call: func() { check(plain.Chat.Completions.New(ctx, params)) }},
		{name: "client", call: func() { check(c.Chat.Completions.New(ctx, params)) }},
		{name: "do", call: func() {
			r, err := c.Do(ctx, body)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.CopyBuffer(io.Discard, onlyReader{r.Body}, buf)
			_ = r.Body.Close()
			if err != nil || n < int64(chunks) {
				b.Fatalf("Do: %d bytes, %v", n, err)
			}
		}},
		{name: "transport", call: func() { check(viaTransport.Chat.Completions.New(ctx, params)) }},
		{name: "plainup", call: func() { check(c.Chat.Completions.New(ctx, params, WithPlainUpstream())) }},
	}
	return doors
}

// onlyReader hides every method but Read.
type onlyReader struct{ io.Reader }

// BenchmarkNewAllocs reports the allocations of one non-streaming call of
// each door alone, against the replay server of BenchmarkNew1000, for
// answers of 16 and 1,000 tokens: allocs/op must not grow with the number
// of chunks beyond what the answer's own text needs.
func BenchmarkNewAllocs(b *testing.B) {
	url := benchServer(b)
	for _, chunks := range []int{16, benchChunks} {
		m := map[int]string{16: "m16", benchChunks: "m"}[chunks]
		for _, d := range nonStreamDoors(b, url, m, chunks) {
			d.call() // warm
			b.Run(d.name+"/"+strconv.Itoa(chunks), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					d.call()
				}
			})
		}
	}
}
