package route

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/tpsroute/tpsroute/measure"
)

const affinityShards = 16

// affinity maps cache keys to the deployment that served them last, with a
// TTL and a fixed capacity. Lookups never wait: a lookup that would contend
// with a writer counts as a miss.
type affinity struct {
	ttl    time.Duration
	seed   maphash.Seed
	shards [affinityShards]affinityShard
}

type affinityShard struct {
	mu   sync.RWMutex
	m    map[string]affinityEntry
	ring []string // insertion order; ring[next] is the oldest once full
	next int
	max  int // the keys the shard holds: len(ring) once full
}

type affinityEntry struct {
	key     measure.Key
	expires time.Time
}

// newAffinity returns an empty affinity of about entries keys. The shards'
// maps and rings grow as keys arrive rather than being sized up front: a
// Picker whose requests carry few cache keys then holds no megabytes of
// empty slots that every garbage collection would scan.
func newAffinity(ttl time.Duration, entries int) *affinity {
	a := &affinity{ttl: ttl, seed: maphash.MakeSeed()}
	per := max(entries/affinityShards, 1)
	for i := range a.shards {
		a.shards[i].m = make(map[string]affinityEntry)
		a.shards[i].max = per
	}
	return a
}

func (a *affinity) shard(cacheKey string) *affinityShard {
	return &a.shards[maphash.String(a.seed, cacheKey)%affinityShards]
}

// get returns the key that served cacheKey, if within the TTL at now. found
// says an entry existed at all (expired or not).
func (a *affinity) get(cacheKey string, now time.Time) (k measure.Key, live, found bool) {
	s := a.shard(cacheKey)
	if !s.mu.TryRLock() {
		return k, false, false
	}
	e, ok := s.m[cacheKey]
	s.mu.RUnlock()
	if !ok {
		return k, false, false
	}
	return e.key, now.Before(e.expires), true
}

func (a *affinity) put(cacheKey string, k measure.Key, now time.Time) {
	s := a.shard(cacheKey)
	e := affinityEntry{key: k, expires: now.Add(a.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[cacheKey]; ok {
		s.m[cacheKey] = e
		return
	}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, cacheKey)
	} else {
		delete(s.m, s.ring[s.next]) // the oldest key
		s.ring[s.next] = cacheKey
		s.next = (s.next + 1) % len(s.ring)
	}
	s.m[cacheKey] = e
}

func (a *affinity) len() int {
	n := 0
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}
