package fleet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tpsroute/tpsroute/measure"
)

// Which deployment holds the state of each stored Responses API response
// and conversation travels in one Redis string per id,
// <prefix>resp:<id>, whose value names the deployment by its measure.Key
// (never a URL or a credential). The replica whose deployment served the
// call writes it at its next round (Owned, early rounds included); another
// replica reads it when a call names an id it does not know (Owner).

// maxIDBytes is the longest id shared, as the Client remembers (real ids
// are tens of bytes): it bounds each key's size in Redis.
const maxIDBytes = 256

// maxOwnerValue bounds the value of one owner key that Owner reads: an
// encoded measure.Key is four names with their lengths, tens of bytes in
// practice. Owner reads at most one byte more (GETRANGE), so a value that
// some other writer made huge costs this replica 4 KiB, not the 64 MiB a
// reply may otherwise declare (maxReplyBytes); Owned does not share a key
// that encodes longer.
const maxOwnerValue = 4 << 10

// maxPendingOwned bounds the ids kept for the next rounds (about 3 MB);
// beyond it the oldest is dropped, and a replica that calls it is routed as
// for an id the fleet does not know.
const maxPendingOwned = 10000

// maxOwnedPerRound bounds the SETs of one round (about 300 KB of
// commands); the rest go at the next round.
const maxOwnedPerRound = 1000

// ownerWait bounds how long a call naming an id this replica does not know
// waits for Redis: one GET, well under a millisecond on the same network.
// Without the answer the call goes to a deployment picked blind, which
// answers 400 previous_response_not_found unless it guessed the owner;
// 50 ms is a small fraction of any deployment's time to first token. A
// replica that found Redis unreachable at its last round does not wait at
// all.
const ownerWait = 50 * time.Millisecond

// ownedRecord is one id whose state a deployment holds, to write.
type ownedRecord struct {
	id  string
	key measure.Key
}

// Owned records that the deployment with key k holds the state of id, a
// Responses API response or conversation id, to be written to Redis (for
// Options.ResponseTTL) at the next round, which it asks to come early. It
// never blocks. An empty id, or one over 256 bytes, is not shared; nor is
// a key whose names encode to over 4 KiB.
func (f *Fleet) Owned(id string, k measure.Key) {
	if id == "" || len(id) > maxIDBytes || encodedKeyLen(k) > maxOwnerValue {
		return
	}
	f.mu.Lock()
	if len(f.owned) >= maxPendingOwned {
		f.owned = f.owned[1:]
	}
	f.owned = append(f.owned, ownedRecord{id: id, key: k})
	f.mu.Unlock()
	f.wake()
}

// Owner returns the key of the deployment that holds id's state, as a
// replica of the fleet wrote it (Owned). It asks Redis once, waiting at most
// 50 ms or until ctx is done; it answers false at once when the last round
// found Redis unreachable, after Close, and for an id over 256 bytes. It
// reads at most 4 KiB of the value; a value it cannot decode, or a longer
// one, is logged at Warn and answers false. The caller checks that the key
// names a deployment it has.
func (f *Fleet) Owner(ctx context.Context, id string) (measure.Key, bool) {
	if id == "" || len(id) > maxIDBytes || !f.connected.Load() {
		return measure.Key{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, min(ownerWait, f.opts.Timeout))
	defer cancel()
	// GETRANGE answers "" for a missing key; an owner value is never empty.
	v, err := f.rdb.GetRange(ctx, f.ownerKey(id), 0, maxOwnerValue).Bytes()
	switch {
	case err == nil && len(v) == 0, errors.Is(err, redis.Nil):
		return measure.Key{}, false
	case err != nil:
		f.logger.Debug("fleet: owner lookup failed", "fleet", f.opts.Name, "err", redactErr(err, f.opts.URL))
		return measure.Key{}, false
	}
	var k measure.Key
	if len(v) > maxOwnerValue {
		err = fmt.Errorf("value longer than %d bytes", maxOwnerValue)
	} else {
		k, err = decodeKey(v)
	}
	if err != nil {
		f.logger.Warn("fleet: owner ignored", "fleet", f.opts.Name, "key", f.ownerKey(id), "err", err)
		return measure.Key{}, false
	}
	return k, true
}

func (f *Fleet) ownerKey(id string) string { return f.prefix + "resp:" + id }

// syncOwned writes up to maxOwnedPerRound of the ids owned since the last
// round, each with Options.ResponseTTL; when Redis fails they are kept for
// the next round (the newest maxPendingOwned).
func (f *Fleet) syncOwned(ctx context.Context) error {
	f.mu.Lock()
	n := min(len(f.owned), maxOwnedPerRound)
	batch := slices.Clone(f.owned[:n])
	f.owned = f.owned[n:]
	f.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	pipe := f.rdb.Pipeline()
	for _, r := range batch {
		pipe.Set(ctx, f.ownerKey(r.id), encodeKey(nil, r.key), f.opts.ResponseTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		f.mu.Lock()
		f.owned = append(batch, f.owned...)
		f.owned = f.owned[max(0, len(f.owned)-maxPendingOwned):]
		f.mu.Unlock()
		return err
	}
	return nil
}

// encodeKey appends k to b: its four fields, each length-prefixed.
func encodeKey(b []byte, k measure.Key) []byte {
	for _, s := range []string{k.Provider, k.Region, k.Model, k.API} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// encodedKeyLen is len(encodeKey(nil, k)), without encoding it.
func encodedKeyLen(k measure.Key) int {
	n := 0
	for _, s := range []string{k.Provider, k.Region, k.Model, k.API} {
		var buf [binary.MaxVarintLen64]byte
		n += binary.PutUvarint(buf[:], uint64(len(s))) + len(s)
	}
	return n
}

// decodeKey reads a key encodeKey wrote, and nothing after it.
func decodeKey(b []byte) (measure.Key, error) {
	var s [4]string
	for i := range s {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return measure.Key{}, fmt.Errorf("truncated at field %d", i)
		}
		s[i] = string(b[n : n+int(l)])
		b = b[n+int(l):]
	}
	if len(b) > 0 {
		return measure.Key{}, fmt.Errorf("%d bytes after the key", len(b))
	}
	if s[0] == "" {
		return measure.Key{}, errors.New("no provider")
	}
	return measure.Key{Provider: s[0], Region: s[1], Model: s[2], API: s[3]}, nil
}
