package tpsroute

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/replay"
	"github.com/tpsroute/tpsroute/route"
)

// stateFleet is three in-memory deployments of model "m", listed slowest
// first: a cold Client probes them in turn, a warm one sends everything to
// "fast".
func stateFleet() (*memFleet, []route.Deployment) {
	f := newMemFleet()
	prof := func(ttft time.Duration, tps float64) map[string]replay.Script {
		return map[string]replay.Script{"m": &replay.Profile{TTFT: ttft, TPS: tps, OutputTokens: 40}}
	}
	return f, []route.Deployment{
		dep("slow", "", "m", f.add("slow", prof(400*time.Millisecond, 30))),
		dep("mid", "", "m", f.add("mid", prof(200*time.Millisecond, 90))),
		dep("fast", "", "m", f.add("fast", prof(100*time.Millisecond, 300))),
	}
}

// planRecorder keeps the order of every plan a Client made.
type planRecorder struct {
	mu    sync.Mutex
	plans [][]string
}

func (p *planRecorder) record(_ route.Request, plan route.Plan) {
	var order []string
	for _, c := range plan.Deployments {
		order = append(order, c.Deployment.Provider)
	}
	p.mu.Lock()
	p.plans = append(p.plans, order)
	p.mu.Unlock()
}

func (p *planRecorder) all() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]string(nil), p.plans...)
}

// stateMeasure is the default window (5 minutes) with 3 samples to be warm.
var stateMeasure = measure.Options{MinSamples: 3}

func stateConfig(f *memFleet, ds []route.Deployment, file string, rec *planRecorder) Config {
	return Config{
		HTTPClient:  &http.Client{Transport: f},
		Deployments: ds,
		// Exploration off: the plan then follows from the statistics alone,
		// so two Clients with equal statistics make equal plans.
		Route:      route.Options{Seed: 7, Exploration: route.Off},
		Measure:    stateMeasure,
		StateFile:  file,
		OnDecision: rec.record,
	}
}

// TestWarmStartRoutesLikeTheStopped: a Client learns three deployments,
// stops (Close writes its state file), and a new Client started from the
// file makes the plans the stopped one would have made, call for call, while
// a cold Client probes the slow deployments first. Once inside one bubble
// (the restart a minute later) and once across two (the new process's clock
// starts before the file's save time: the state is rebased, not lost).
func TestWarmStartRoutesLikeTheStopped(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tpsroute.state")
	const learn, next = 30, 12
	var stoppedNext [][]string
	synctest.Test(t, func(t *testing.T) {
		f, ds := stateFleet()
		var rec planRecorder
		c := mustNew(t, stateConfig(f, ds, file, &rec))
		seq := calls(t, c, learn, time.Second)
		require.Greater(t, share(seq[learn-10:], "fast"), 0.9, "the first Client learned: %v", seq)
		require.NoError(t, c.Close())
		require.FileExists(t, file)
		// What the stopped Client would have done next: its next plans, on
		// the statistics it saved (the Client stays usable after Close).
		calls(t, c, next, time.Second)
		stoppedNext = rec.all()[learn:]
	})

	for _, tc := range []struct {
		name  string
		later bool // restart in the same bubble a minute later
	}{{"a minute later", true}, {"new process clock", false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if tc.later {
					time.Sleep(learn*time.Second + time.Minute)
				}
				f, ds := stateFleet()
				data, err := os.ReadFile(file)
				require.NoError(t, err)
				dir := t.TempDir()
				copyFile := filepath.Join(dir, "state")
				require.NoError(t, os.WriteFile(copyFile, data, 0o600))

				var warm, cold planRecorder
				w := mustNew(t, stateConfig(f, ds, copyFile, &warm))
				seq := calls(t, w, next, time.Second)
				assert.Equal(t, stoppedNext, warm.all(), "the restarted Client plans as the stopped one would have")
				assert.Equal(t, 1.0, share(seq, "fast"), "%v", seq)
				require.NoError(t, w.Close())

				k := mustNew(t, stateConfig(f, ds, "", &cold))
				seq = calls(t, k, next, time.Second)
				assert.NotEqual(t, stoppedNext, cold.all())
				// A cold Client probes each deployment once first (one sample
				// is compared: route's minCompare), the warm one never.
				assert.Less(t, share(seq, "fast"), 1.0, "a cold Client probes first: %v", seq)
				assert.Subset(t, seq, []string{"slow", "mid"}, "a cold Client probes every deployment")
				require.NoError(t, k.Close())
			})
		})
	}
}

// TestStateFileWrittenPeriodically: with StateInterval the file is written
// by one goroutine, atomically (no temporary file is left behind, mode
// 0600), holds what was measured by then, and Close stops the goroutine
// (synctest fails a bubble that leaves one running).
func TestStateFileWrittenPeriodically(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		file := filepath.Join(dir, "state")
		f, ds := stateFleet()
		var rec planRecorder
		cfg := stateConfig(f, ds, file, &rec)
		cfg.StateInterval = 10 * time.Second
		c := mustNew(t, cfg)
		_, err := os.Stat(file)
		require.ErrorIs(t, err, os.ErrNotExist, "nothing written before the first interval")

		start := time.Now()
		calls(t, c, 3, time.Second)
		require.Less(t, time.Since(start), 10*time.Second)
		time.Sleep(time.Until(start.Add(10*time.Second + time.Millisecond)))
		synctest.Wait() // the write at 10 s is done
		total := func(snap measure.Snapshot) int64 {
			var n int64
			for _, st := range snap.All() {
				n += st.Requests
			}
			return n
		}
		requests := func() int64 {
			r := registry.New(stateMeasure)
			fh, err := os.Open(file)
			require.NoError(t, err)
			defer fh.Close()
			_, err = r.RestoreState(fh, time.Now(), nil)
			require.NoError(t, err)
			return total(r.Snapshot())
		}
		require.Positive(t, total(c.Stats()))
		assert.Equal(t, total(c.Stats()), requests(), "the write at 10 s holds the calls made by then")
		st, err := os.Stat(file)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

		calls(t, c, 3, time.Second)
		require.NoError(t, c.Close())
		assert.Equal(t, total(c.Stats()), requests(), "Close writes the rest")
		require.NoError(t, c.Close(), "Close is idempotent")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1, "no temporary file is left: %v", entries)
	})
}

// TestStateFileProblems: what New does with each kind of file.
func TestStateFileProblems(t *testing.T) {
	f, ds := stateFleet()
	good := func(t *testing.T) []byte {
		dir := t.TempDir()
		var rec planRecorder
		c := mustNew(t, stateConfig(f, ds, filepath.Join(dir, "s"), &rec))
		for _, d := range ds { // one call on each
			_, _, err := streamOnce(t, c, "m", WithPin(d.Provider, ""))
			require.NoError(t, err)
		}
		require.NoError(t, c.Close())
		data, err := os.ReadFile(filepath.Join(dir, "s"))
		require.NoError(t, err)
		return data
	}(t)
	truncated := good[:len(good)/2]
	otherVersion := bytes.Clone(good)
	otherVersion[4] = 99
	for _, tc := range []struct {
		name    string
		content []byte // nil: no file
		wantErr error  // New's error; nil: New succeeds
		warn    string // logged at Warn
		keys    int    // keys restored
	}{
		{name: "missing: cold start", content: nil},
		{name: "valid", content: good, keys: 3},
		{name: "truncated: cold start", content: truncated, warn: "corrupt"},
		{name: "other version: cold start", content: otherVersion, warn: "version"},
		{name: "not a state file: refused", content: []byte(`{"deployments": []}`), wantErr: measure.ErrStateFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "state")
			if tc.content != nil {
				require.NoError(t, os.WriteFile(file, tc.content, 0o600))
			}
			var logs bytes.Buffer
			var rec planRecorder
			cfg := stateConfig(f, ds, file, &rec)
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			cfg.StateInterval = -1
			c, err := New(cfg)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), "refusing to overwrite")
				got, rerr := os.ReadFile(file)
				require.NoError(t, rerr)
				assert.Equal(t, tc.content, got, "the file is left alone")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.keys, c.Stats().Len())
			if tc.warn != "" {
				assert.Contains(t, logs.String(), "level=WARN")
				assert.Contains(t, logs.String(), tc.warn)
			} else {
				assert.Empty(t, logs.String())
			}
			require.NoError(t, c.Close())
			// Close replaced whatever was there with a valid state file.
			fh, err := os.Open(file)
			require.NoError(t, err)
			defer fh.Close()
			_, err = registry.New(stateMeasure).RestoreState(fh, time.Now(), nil)
			assert.NoError(t, err)
		})
	}
	t.Run("unreadable path", func(t *testing.T) {
		dir := t.TempDir()
		var rec planRecorder
		_, err := New(stateConfig(f, ds, dir, &rec)) // a directory
		require.Error(t, err)
		assert.True(t, strings.HasPrefix(err.Error(), "tpsroute: state file"), err.Error())
	})
	t.Run("other window options: cold start", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.WriteFile(file, good, 0o600))
		var rec planRecorder
		var logs bytes.Buffer
		cfg := stateConfig(f, ds, file, &rec)
		cfg.Measure = testMeasure() // a one-minute window
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c := mustNew(t, cfg)
		assert.Equal(t, 0, c.Stats().Len())
		assert.Contains(t, logs.String(), "incompatible windows")
		require.NoError(t, c.Close())
	})
	t.Run("deployment removed from the config", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "state")
		require.NoError(t, os.WriteFile(file, good, 0o600))
		var rec planRecorder
		c := mustNew(t, stateConfig(f, ds[1:], file, &rec))
		assert.Equal(t, 2, c.Stats().Len())
		_, ok := c.Stats().Lookup(ds[0].Key())
		assert.False(t, ok)
		require.NoError(t, c.Close())
	})
}

// TestKeepConfigured: which saved keys a configuration still serves.
func TestKeepConfigured(t *testing.T) {
	keep := keepConfigured([]route.Deployment{
		{Provider: "a", Region: "us", Model: "m"},
		{Provider: "b", Model: "m", Revision: "2"},
		{Provider: "w", Region: "eu", Model: route.Wildcard},
		{Provider: "l", Model: route.Wildcard, Models: []string{"x"}, Revision: "r"},
	})
	for k, want := range map[measure.Key]bool{
		{Provider: "a", Region: "us", Model: "m"}:   true,
		{Provider: "a", Region: "eu", Model: "m"}:   false,
		{Provider: "b", Model: "m@2"}:               true,
		{Provider: "b", Model: "m"}:                 false,
		{Provider: "w", Region: "eu", Model: "any"}: true,
		{Provider: "w", Region: "us", Model: "any"}: false,
		{Provider: "l", Model: "x@r"}:               true,
		{Provider: "l", Model: "y@r"}:               false,
		{Provider: "l", Model: "x"}:                 false,
	} {
		assert.Equal(t, want, keep(k), "%v", k)
	}
}

// TestCloseWithoutStateFile: Close is a no-op then.
func TestCloseWithoutStateFile(t *testing.T) {
	f, ds := stateFleet()
	var rec planRecorder
	c := mustNew(t, stateConfig(f, ds, "", &rec))
	assert.NoError(t, c.Close())
	assert.Nil(t, c.state)
}
