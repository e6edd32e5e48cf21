package fleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tpsroute/tpsroute/internal/executor"
	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
	"github.com/tpsroute/tpsroute/route"
)

// Defaults. A zero Options means these; each is stated at its field.
const (
	defaultName    = "default"
	defaultSync    = time.Second
	defaultTimeout = 500 * time.Millisecond
	// As long as OpenAI keeps a stored response. Each call of a
	// conversation writes its id again, so a conversation is forgotten 30
	// days after its last call.
	defaultResponseTTL = 30 * 24 * time.Hour
)

const (
	// SchemaVersion is the version of the keys and values this package
	// writes. Keys carry it, and replicas announce it: a replica running
	// another version is ignored, with one log line.
	SchemaVersion = 1
)

// ErrClosed is returned by Join after Close.
var ErrClosed = errors.New("fleet: closed")

// Options configures a Fleet. A zero Options, apart from URL, consists
// entirely of default values. It is a plain value that New copies.
type Options struct {
	// URL locates Redis: redis://[user:password@]host:port/db, or
	// rediss://... for TLS (see redis.ParseURL). Required.
	URL string
	// Name namespaces the keys, so that several fleets share one Redis.
	// Empty means "default".
	Name string
	// Sync is the interval between two publications of this replica's
	// measurements. Zero means 1 s: each replica publishes what it measured
	// and reads the others' once a second, so a degradation seen by one
	// replica reaches the others within two seconds.
	Sync time.Duration
	// Timeout bounds each round trip to Redis. Zero means 500 ms. A slower
	// Redis counts as unreachable; calls never wait for it either way.
	Timeout time.Duration
	// Replica names this replica in the fleet (in logs and Status). Empty
	// means a random 12-hex-digit name, new at each start.
	Replica string
	// ResponseTTL is how long Redis keeps which deployment holds the state
	// of a Responses API response or conversation (Owned), from its last
	// write. Zero means 30 days, as long as OpenAI keeps a stored
	// response; a shorter one bounds Redis's memory (about 150 bytes per
	// id) for fleets that store many responses and follow few of them up
	// late.
	ResponseTTL time.Duration
	// Logger receives one record when Redis becomes unreachable, one when it
	// is back, one per ignored replica, and one per Responses owner read
	// from Redis that does not decode. Nil means silent.
	Logger *slog.Logger
}

// Fleet connects one tpsroute.Client (through Join) to the other replicas
// of a fleet through Redis: it publishes this replica's measurements and
// merges the others', shares breakers, enforces RPM/TPM limits fleet-wide,
// shares cache affinity and which deployment holds each stored Responses
// API response. Everything that talks to Redis runs in one
// background goroutine that Join starts and Close stops; the methods called
// on the call path (the executor.Shared ones, Served and Owned) answer from
// memory; Owner, called for an id the Client does not know, waits for Redis
// at most 50 ms.
//
// A Fleet is safe for concurrent use. It serves one Client.
type Fleet struct {
	opts   Options
	rdb    *redis.Client
	prefix string // "tpsroute:v1:<name>:"
	logger *slog.Logger

	mu      sync.Mutex
	joined  bool
	closed  bool
	reg     *registry.Registry
	exp     *registry.Exporter
	learn   func(cacheKey string, k measure.Key, at time.Time)
	keys    map[measure.Key]*keyState
	served  []affinityRecord // to publish
	owned   []ownedRecord    // to write
	lastID  string           // last stream entry read
	since   time.Time        // read no stream entry before; zero: the window
	ignored map[string]bool  // replicas on another schema, logged once
	peers   map[string]time.Time

	connected atomic.Bool
	everOK    atomic.Bool
	lastSync  atomic.Int64 // UnixNano of the last successful sync
	failures  atomic.Int64
	sentBytes atomic.Int64
	recvBytes atomic.Int64

	kick   chan struct{}
	manual bool // tests: JoinClient starts no loop; rounds are driven by syncAt
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a Fleet for o. It parses the URL but does not connect: Join
// starts the background loop, which connects and reconnects on its own.
func New(o Options) (*Fleet, error) {
	if o.URL == "" {
		return nil, errors.New("fleet: Options.URL is required")
	}
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", redactErr(err, o.URL))
	}
	o.Name = cmp.Or(o.Name, defaultName)
	if strings.ContainsAny(o.Name, ":{} \t\n") {
		return nil, fmt.Errorf("fleet: name %q: must not contain ':', braces or spaces", o.Name)
	}
	if o.Sync <= 0 {
		o.Sync = defaultSync
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.ResponseTTL <= 0 {
		o.ResponseTTL = defaultResponseTTL
	}
	if o.Replica == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		o.Replica = hex.EncodeToString(b[:])
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	// A context's deadline shortens a round trip too (Owner's 50 ms bound on
	// the call path); go-redis ignores it otherwise.
	ro.ContextTimeoutEnabled = true
	ro.MaxRetries = -1   // the loop retries at the next tick
	ro.DialerRetries = 1 // a dead Redis fails the round at once
	ro.PoolSize = 4
	ro.DisableIdentity = true
	ro.Protocol = 2
	// Every reply is checked as it is read, against maxReplyBytes (resp.go).
	ro.Dialer = limitDialer(ro.NewDialer())
	f := &Fleet{
		opts:    o,
		rdb:     redis.NewClient(ro),
		prefix:  fmt.Sprintf("tpsroute:v%d:%s:", SchemaVersion, o.Name),
		logger:  o.Logger,
		keys:    map[measure.Key]*keyState{},
		ignored: map[string]bool{},
		peers:   map[string]time.Time{},
		kick:    make(chan struct{}, 1),
	}
	if f.logger == nil {
		f.logger = slog.New(slog.DiscardHandler)
	}
	return f, nil
}

// redactErr removes the URL (which may hold a password) from err's text.
func redactErr(err error, url string) error {
	msg := err.Error()
	if url != "" && strings.Contains(msg, url) {
		msg = strings.ReplaceAll(msg, url, "[redis URL]")
	}
	return errors.New(msg)
}

// JoinClient attaches the Fleet to a Client and starts the background
// loop; it implements tpsroute.Fleet and is called once, by tpsroute.New (a
// second call returns an error). reg holds the Client's statistics: the
// Fleet exports its deltas and merges the other replicas' into it. What reg
// holds when JoinClient is called (statistics restored from a state file,
// Config.StateFile) is not exported: the fleet had it when it was measured;
// and the stream is then read from the state's save time on, not over the
// whole window, since the state holds what was merged before. The
// deployments' Limits.RPM and TPM are enforced fleet-wide (wildcard
// deployments are not shared); their credentials are not read. learn records
// a cache key that another replica's call was served with; it must be safe
// for concurrent use. The returned executor.Shared is the Fleet's
// breakers and limits.
func (f *Fleet) JoinClient(reg *registry.Registry, deployments []route.Deployment, learn func(cacheKey string, k measure.Key, at time.Time)) (executor.Shared, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.closed:
		return nil, ErrClosed
	case f.joined:
		return nil, errors.New("fleet: already joined to a Client")
	case reg == nil:
		return nil, errors.New("fleet: nil Registry")
	}
	f.joined = true
	f.reg = reg
	f.exp = reg.NewExporter()
	// What reg holds already was restored from a state file (tpsroute.New
	// joins before the first call): the fleet received those samples when
	// they were measured, so they are marked published, not sent again.
	f.exp.Export()
	f.exp.Commit()
	// The restored state holds what the fleet's stream said until it was
	// saved: read the stream from then on, not the whole window again.
	f.since, _ = reg.Restored()
	f.learn = learn
	for _, d := range deployments {
		if d.IsWildcard() {
			continue
		}
		f.keys[d.Key()] = newKeyState(d.Key(), d.Limits, f.opts.Sync)
	}
	if !f.manual {
		ctx, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		f.done = make(chan struct{})
		go f.loop(ctx)
	}
	return shared{f}, nil
}

// Close stops the background loop and closes the connections to Redis. It
// waits for the loop to return. Methods called after Close answer as if
// Redis were unreachable: every replica decides alone.
func (f *Fleet) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	cancel, done := f.cancel, f.done
	f.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	f.connected.Store(false)
	return f.rdb.Close()
}

// Status is a Fleet's state, for debug pages and logs. It is a plain value.
type Status struct {
	Name      string    `json:"name"`
	Replica   string    `json:"replica"`
	Schema    int       `json:"schema"`
	Connected bool      `json:"connected"`
	Replicas  int       `json:"replicas_seen"` // other replicas seen within three sync intervals
	LastSync  time.Time `json:"last_sync"`     // zero before the first successful sync
	Failures  int64     `json:"sync_failures"` // syncs that failed since start
	SentBytes int64     `json:"sent_bytes"`    // measurement payload published
	RecvBytes int64     `json:"received_bytes"`
}

// Status returns the Fleet's state at now.
func (f *Fleet) Status(now time.Time) Status {
	s := Status{Name: f.opts.Name, Replica: f.opts.Replica, Schema: SchemaVersion,
		Connected: f.connected.Load(), Failures: f.failures.Load(),
		SentBytes: f.sentBytes.Load(), RecvBytes: f.recvBytes.Load()}
	if t := f.lastSync.Load(); t != 0 {
		s.LastSync = time.Unix(0, t)
	}
	f.mu.Lock()
	for _, seen := range f.peers {
		if now.Sub(seen) <= 3*f.opts.Sync {
			s.Replicas++
		}
	}
	f.mu.Unlock()
	return s
}

// loop syncs every Options.Sync, and at once when kicked (a breaker opened
// or closed, a limit's lease ran low, a Responses id was owned).
func (f *Fleet) loop(ctx context.Context) {
	defer close(f.done)
	t := time.NewTicker(f.opts.Sync)
	defer t.Stop()
	f.syncAt(ctx, time.Now(), true)
	var lastKick time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.syncAt(ctx, time.Now(), true)
		case <-f.kick:
			// Early rounds (breakers, leases, owned ids) at most ten per
			// interval; a kick within a tenth waits for the tick.
			if now := time.Now(); now.Sub(lastKick) >= f.opts.Sync/10 {
				lastKick = now
				f.syncAt(ctx, now, false)
			}
		}
	}
}

// wake asks the loop for an early sync of breakers, leases and owned ids. It
// never blocks.
func (f *Fleet) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// syncAt runs one round: with full set it publishes and merges measurements
// too; otherwise only breakers, probes, leases and owned Responses ids. A failure marks the fleet
// disconnected (logged once) until a round succeeds.
func (f *Fleet) syncAt(ctx context.Context, now time.Time, full bool) {
	ctx, cancel := context.WithTimeout(ctx, 4*f.opts.Timeout)
	defer cancel()
	err := f.syncBreakers(ctx, now)
	if err == nil {
		err = f.syncLimits(ctx, now)
	}
	if err == nil {
		err = f.syncOwned(ctx)
	}
	if err == nil && full {
		err = f.syncStats(ctx, now)
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // closing
		}
		f.failures.Add(1)
		if f.connected.Swap(false) || !f.everOK.Load() && f.failures.Load() == 1 {
			f.logger.Warn("fleet: Redis unreachable; routing on local data only", "fleet", f.opts.Name, "err", redactErr(err, f.opts.URL))
		}
		return
	}
	if full {
		f.lastSync.Store(now.UnixNano())
	}
	if !f.connected.Swap(true) {
		if f.everOK.Swap(true) {
			f.logger.Info("fleet: Redis reachable again; rejoined", "fleet", f.opts.Name)
		}
	}
}
