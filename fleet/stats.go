package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tpsroute/tpsroute/internal/registry"
	"github.com/tpsroute/tpsroute/measure"
)

// Measurements and cache affinity travel in one Redis stream per fleet,
// <prefix>stats: each round, a replica that measured something appends one
// entry (r: replica, v: schema version, d: its registry.Deltas, a: the cache
// keys it served) and reads the entries the others appended since its last
// read. The stream is trimmed to the measurement window (older entries
// cannot matter: their sub-windows have left every window) and expires when
// no replica writes. Replicas announce themselves in the unversioned hash
// tpsroute:<name>:replicas ("v<schema> <unix ms>"), so that one running
// another schema version is seen and logged, not merged.

// affinityRecord is one cache key served, to share. CacheKey is the hash the
// Client routes on (the Client hashes cache keys in fleet mode), never the
// caller's key.
type affinityRecord struct {
	cacheKey string
	key      measure.Key
	at       time.Time
}

// maxPendingAffinity bounds the affinity records kept for the next publish.
const maxPendingAffinity = 10000

// A round reads the stream in at most streamBatches XREADs of streamBatch
// entries: 1,600 entries, a five-minute window of five replicas at the
// default 1 s sync (a larger fleet catches up over a few rounds). One XREAD
// may declare maxReplyBytes, so an entry may hold 4 MiB: at about 242 bytes
// per deployment key that had calls and about 90 per cache key served (at
// most maxPendingAffinity, 0.9 MB), that is some 13,000 busy keys.
const (
	streamBatch   = 16
	streamBatches = 100
)

// Served records that the deployment with key k served cacheKey at now, to
// be shared at the next round. It never blocks.
func (f *Fleet) Served(cacheKey string, k measure.Key, now time.Time) {
	if cacheKey == "" {
		return
	}
	f.mu.Lock()
	if len(f.served) >= maxPendingAffinity {
		f.served = f.served[1:]
	}
	f.served = append(f.served, affinityRecord{cacheKey: cacheKey, key: k, at: now})
	f.mu.Unlock()
}

func (f *Fleet) streamKey() string   { return f.prefix + "stats" }
func (f *Fleet) replicasKey() string { return "tpsroute:" + f.opts.Name + ":replicas" }

// syncStats publishes this replica's deltas and affinity, announces it, and
// merges what the others published.
func (f *Fleet) syncStats(ctx context.Context, now time.Time) error {
	f.mu.Lock()
	exp, reg, learn := f.exp, f.reg, f.learn
	served := f.served
	f.mu.Unlock()
	window := reg.Options().Window.Length

	ds := exp.Export()
	var d []byte
	if len(ds) > 0 {
		d = binary.AppendUvarint(d, uint64(len(ds)))
		for i := range ds {
			b, err := ds[i].MarshalBinary()
			if err != nil {
				return err
			}
			d = binary.AppendUvarint(d, uint64(len(b)))
			d = append(d, b...)
		}
	}
	a := encodeAffinity(served)
	pipe := f.rdb.Pipeline()
	if len(d) > 0 || len(served) > 0 {
		pipe.XAdd(ctx, &redis.XAddArgs{
			Stream: f.streamKey(),
			MinID:  strconv.FormatInt(now.Add(-window).UnixMilli(), 10),
			Approx: true,
			Values: []any{"r", f.opts.Replica, "v", SchemaVersion, "d", d, "a", a},
		})
		pipe.PExpire(ctx, f.streamKey(), 2*window)
	}
	pipe.HSet(ctx, f.replicasKey(), f.opts.Replica, fmt.Sprintf("v%d %d", SchemaVersion, now.UnixMilli()))
	pipe.PExpire(ctx, f.replicasKey(), max(10*f.opts.Sync, time.Minute))
	members := pipe.HGetAll(ctx, f.replicasKey())
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	exp.Commit()
	f.mu.Lock()
	f.served = f.served[len(served):]
	if len(f.served) == 0 {
		f.served = nil
	}
	f.mu.Unlock()
	f.sentBytes.Add(int64(len(d) + len(a)))
	f.readMembers(members.Val(), now)

	f.mu.Lock()
	last, since := f.lastID, f.since
	f.mu.Unlock()
	if last == "" {
		from := now.Add(-window)
		if since.After(from) {
			from = since
		}
		last = strconv.FormatInt(from.UnixMilli(), 10) + "-0"
	}
	for range streamBatches { // the rest next round
		res, err := f.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{f.streamKey(), last}, Count: streamBatch, Block: -1}).Result()
		if errors.Is(err, redis.Nil) {
			break
		}
		if err != nil {
			return err
		}
		n := 0
		for _, s := range res {
			for _, m := range s.Messages {
				n++
				last = m.ID
				f.apply(m, reg, learn, now)
			}
		}
		f.mu.Lock()
		f.lastID = last
		f.mu.Unlock()
		if n < streamBatch {
			break
		}
	}
	return nil
}

// apply merges one stream entry from another replica.
func (f *Fleet) apply(m redis.XMessage, reg *registry.Registry, learn func(string, measure.Key, time.Time), now time.Time) {
	r, _ := m.Values["r"].(string)
	if r == f.opts.Replica {
		return
	}
	if v, _ := m.Values["v"].(string); v != strconv.Itoa(SchemaVersion) {
		f.ignore(r, v)
		return
	}
	d, _ := m.Values["d"].(string)
	a, _ := m.Values["a"].(string)
	f.recvBytes.Add(int64(len(d) + len(a)))
	b := []byte(d)
	n, k := binary.Uvarint(b)
	if k <= 0 && len(b) > 0 {
		f.logger.Warn("fleet: malformed entry ignored", "replica", r, "id", m.ID)
		return
	}
	b = b[max(k, 0):]
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			f.logger.Warn("fleet: malformed entry ignored", "replica", r, "id", m.ID)
			return
		}
		var dl registry.Delta
		if err := dl.UnmarshalBinary(b[k : k+int(l)]); err != nil {
			f.logger.Warn("fleet: malformed delta ignored", "replica", r, "err", err)
		} else if err := reg.MergeAt(now, &dl); err != nil {
			f.ignore(r, "window options differ: "+err.Error())
		}
		b = b[k+int(l):]
	}
	if learn != nil {
		for _, rec := range decodeAffinity([]byte(a)) {
			learn(rec.cacheKey, rec.key, rec.at)
		}
	}
}

// ignore logs, once per replica, that its data is not merged.
func (f *Fleet) ignore(replica, why string) {
	f.mu.Lock()
	seen := f.ignored[replica]
	f.ignored[replica] = true
	f.mu.Unlock()
	if !seen {
		f.logger.Warn("fleet: ignoring replica", "fleet", f.opts.Name, "replica", replica, "schema", why, "want", fmt.Sprintf("v%d", SchemaVersion))
	}
}

// readMembers updates the replicas seen and logs those on another schema.
func (f *Fleet) readMembers(m map[string]string, now time.Time) {
	for r, v := range m {
		if r == f.opts.Replica {
			continue
		}
		ver, ms, ok := strings.Cut(v, " ")
		if ver != fmt.Sprintf("v%d", SchemaVersion) {
			f.ignore(r, ver)
			continue
		}
		t, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			continue
		}
		f.mu.Lock()
		f.peers[r] = time.UnixMilli(t)
		f.mu.Unlock()
	}
	f.mu.Lock()
	maps.DeleteFunc(f.peers, func(_ string, t time.Time) bool { return now.Sub(t) > 10*f.opts.Sync })
	f.mu.Unlock()
}

func encodeAffinity(rs []affinityRecord) []byte {
	var b []byte
	for _, r := range rs {
		for _, s := range []string{r.cacheKey, r.key.Provider, r.key.Region, r.key.Model} {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		b = binary.AppendVarint(b, r.at.UnixMilli())
	}
	return b
}

func decodeAffinity(b []byte) []affinityRecord {
	var out []affinityRecord
	for len(b) > 0 {
		var s [4]string
		for i := range s {
			l, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < l {
				return out
			}
			s[i] = string(b[k : k+int(l)])
			b = b[k+int(l):]
		}
		ms, k := binary.Varint(b)
		if k <= 0 {
			return out
		}
		b = b[k:]
		out = append(out, affinityRecord{cacheKey: s[0], key: measure.Key{Provider: s[1], Region: s[2], Model: s[3]}, at: time.UnixMilli(ms)})
	}
	return out
}
