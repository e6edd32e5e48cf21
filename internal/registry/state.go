package registry

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"

	"github.com/tpsroute/tpsroute/measure"
)

// State files: a Registry's statistics saved to bytes (SaveState) and
// restored from them (RestoreState), so that a restarted process routes on
// what the stopped one measured. The format is documented in
// docs/STATE.md; this comment is its summary.
//
//	file    = magic "TPSS" · version byte (1) · body · CRC-32C (Castagnoli) of
//	          everything before it, 4 bytes little-endian
//	body    = saved (varint, UnixNano) · window length (uvarint, ns) ·
//	          buckets (uvarint) · relative accuracy (float64 LE) ·
//	          half-life (uvarint, ns) · key count (uvarint) · key*
//	key     = provider · region · model (each uvarint length + bytes) ·
//	          section* · 0
//	section = tag (uvarint, > 0) · length (uvarint) · that many bytes
//
// Integers are the varints of sketches-go's encoding package, floats
// float64 little-endian, and windows Window.MarshalBinary's bytes (a
// sub-window's sketch in sketches-go's DDSketch format), length-prefixed.
// Tag 1 holds the key's own statistics (times, TTFT PeakEWMA, chunk-gap
// window and EWMA, the change detectors, error classes); tag 2 one cache
// state's (its windows, EWMAs, counters and outcomes), once per state used;
// tag 3 the load model and the prompt-size classes (load.go, input.go),
// when the key has either; tag 4 what other Registries merged in (fleet
// mode), when there is any; tag 5 the change detectors' spreads from
// before their changes (shift.go), after tag 1, when one differs from its
// detector's variance (a reader sets them to it without the section); tag
// 6 the count of samples whose usage was implausible, when not 0; tag 7
// the change detectors' slow levels (shift.go; TPS then TTFT, log units,
// float64 LE each), after tag 1, when one differs from its detector's level
// (a reader sets them to the level without the section).
// A reader skips sections whose tag it does not know, so a later writer may
// add sections without a new version; a change that would make skipping
// wrong changes the version byte.
//
// A reader checks the header before it reads on, so that a file that is
// not a state file is never read whole. A damaged key record (a value out
// of range, a string too long, a section or the key written twice) is
// skipped and the rest restored; a damaged file (header, checksum, framing)
// restores nothing.

const (
	stateMagic   = "TPSS"
	stateVersion = 1

	tagKey   = 1 // the key's own statistics
	tagCache = 2 // one cache state's statistics
	tagShape = 3 // the load model and the prompt-size classes
	tagFleet = 4 // what other Registries merged in (MergeAt)
	tagCalm  = 5 // the change detectors' spreads from before their changes (shift.go)
	tagUsage = 6 // the count of implausible usage (Stats.ImplausibleUsage)
	tagDrift = 7 // the change detectors' slow levels (shift.go), when one differs from its level

	maxStateBytes  = 1 << 30             // RestoreState reads at most this much
	maxKeyString   = measure.MaxKeyBytes // bytes in one of a Key's strings
	maxClassString = 256                 // bytes in one error class name
	// maxStateTime bounds every time in a state file (UnixNano, about the
	// years 1897 to 2043), so that rebasing cannot overflow.
	maxStateTime = 1 << 61
	// maxBadKeys is how many skipped key records RestoreInfo.BadKeys names.
	maxBadKeys = 16
	// keyNameBytes is how much of a string longer than maxKeyString a
	// KeyError keeps to name it.
	keyNameBytes = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of RestoreState. Each error RestoreState returns wraps one of
// these, measure.ErrStateFormat (the one the root's Config.StateFile
// returns, so that users match it), or ErrIncompatible, or is the reader's
// own error.
var (
	// ErrStateVersion means a state file of a format version this package
	// does not read.
	ErrStateVersion = errors.New("measure: unsupported state file version")
	// ErrStateCorrupt means a state file that is truncated, fails its
	// checksum or holds values out of range; or, wrapped in a KeyError, one
	// key record that was skipped.
	ErrStateCorrupt = errors.New("measure: corrupt state file")
	// ErrStateNotEmpty means RestoreState was called on a Registry that
	// already holds a key.
	ErrStateNotEmpty = errors.New("measure: restore into a Registry that is not empty")
)

// RestoreInfo says what RestoreState restored. It is a plain value.
type RestoreInfo struct {
	// SavedAt is the time the state was saved at (SaveState's now).
	SavedAt time.Time
	// Shift is how far every time in the file was moved, zero or negative:
	// non-zero only when the file was saved after the restore's now (a clock
	// stepped back, or a test's virtual clock), by that difference rounded
	// to sub-windows, so that the state is no younger than it was when saved.
	Shift time.Duration
	// Keys is the number of keys restored.
	Keys int
	// Expired counts the keys not restored because they had been idle for
	// longer than Options.TTL at now (a prune would drop them).
	Expired int
	// Skipped counts the keys not restored because keep rejected them.
	Skipped int
	// Bad counts the key records not restored because they were damaged:
	// a value out of range, a key string longer than 4096 bytes, a section
	// written twice, or the key written twice (every copy is dropped). The
	// file's other keys are restored (docs/STATE.md, "Errors").
	Bad int
	// BadKeys names the first 16 of them, and what was wrong with each.
	BadKeys []*KeyError
}

// KeyError is a key record of a state file that RestoreState skipped
// (RestoreInfo.BadKeys): its key and what was wrong with it. The rest of
// the file was restored. A KeyError is a plain value, safe for concurrent
// reads.
type KeyError struct {
	// Key is the record's key. A string longer than the 4096 bytes a state
	// file holds is cut to its first 64 bytes followed by "…".
	Key measure.Key
	// Err says what was wrong; it wraps ErrStateCorrupt.
	Err error
}

// Error returns Err's message followed by the key.
func (e *KeyError) Error() string { return fmt.Sprintf("%v (key %q)", e.Err, e.Key.String()) }

// Unwrap returns Err.
func (e *KeyError) Unwrap() error { return e.Err }

// SaveState writes the Registry's statistics at now to w in the state file
// format (docs/STATE.md): for every key and cache state, the windows'
// sub-windows, the EWMAs and PeakEWMAs with their last-update times, the
// change detectors, the counters, the outcome counts behind the error rate,
// the error classes and the token and cost meters, with every time as Unix
// nanoseconds. Keys idle for longer than Options.TTL at now are left out
// (RestoreState would not restore them), and so are keys with neither a
// sample of their own nor merged data, and keys with a string longer than
// the 4096 bytes a state file holds (a caller's long model name on a
// wildcard deployment). Counters are at most 2^62-1 (they saturate there),
// what RestoreState accepts. What other Registries merged in
// (MergeAt, fleet mode) is saved in a section of its own. Calls in flight
// are not saved. Each key is read under its own lock, as Snapshot does, so Records
// may go on meanwhile; the bytes are written with one Write at the end.
// The output is deterministic: keys are sorted as in Snapshot.Keys.
//
// SaveState is safe for concurrent use. It returns w's error, if any.
func (r *Registry) SaveState(w io.Writer, now time.Time) error {
	_, err := w.Write(r.appendState(nil, now))
	return err
}

func (r *Registry) appendState(b []byte, now time.Time) []byte {
	start := len(b)
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	o := r.opts
	enc.EncodeVarint64(&b, now.UnixNano())
	enc.EncodeUvarint64(&b, uint64(o.Window.Length))
	enc.EncodeUvarint64(&b, uint64(o.Window.Buckets))
	enc.EncodeFloat64LE(&b, o.Window.RelativeAccuracy)
	enc.EncodeUvarint64(&b, uint64(o.HalfLife))

	m := *r.keys.Load()
	keys := slices.SortedFunc(maps.Keys(m), compareKeys)
	t := now.UnixNano()
	var body []byte // the keys, counted first
	n := 0
	var sec, scratch []byte
	for _, k := range keys {
		if !fits(k) {
			continue
		}
		e := m[k]
		e.mu.Lock()
		if e.dead || t-e.lastSeen > int64(o.TTL) || !e.hasData() {
			e.mu.Unlock()
			continue
		}
		n++
		appendKey(&body, k)
		sec = e.appendKeySection(sec[:0], now, &scratch)
		body = appendSection(body, tagKey, sec)
		for cs, st := range e.states {
			if st == nil {
				continue
			}
			sec = append(sec[:0], byte(cs))
			sec = st.appendSection(sec, now, &scratch)
			body = appendSection(body, tagCache, sec)
		}
		if e.remote != nil {
			sec = e.remote.appendSection(sec[:0], now, &scratch)
			body = appendSection(body, tagFleet, sec)
		}
		if e.hasShape() {
			body = appendSection(body, tagShape, e.appendShapeSection(sec[:0]))
		}
		if e.tpsShift.calmed() || e.ttftShift.calmed() {
			sec = sec[:0]
			for _, sh := range []*shift{&e.tpsShift, &e.ttftShift} {
				for _, v := range []float64{sh.upVari, sh.downVari, sh.calm} {
					enc.EncodeFloat64LE(&sec, v)
				}
			}
			body = appendSection(body, tagCalm, sec)
		}
		if e.implausible > 0 {
			sec = sec[:0]
			putCount(&sec, e.implausible, maxCount)
			body = appendSection(body, tagUsage, sec)
		}
		if e.tpsShift.slow != e.tpsShift.level || e.ttftShift.slow != e.ttftShift.level {
			sec = sec[:0]
			enc.EncodeFloat64LE(&sec, e.tpsShift.slow)
			enc.EncodeFloat64LE(&sec, e.ttftShift.slow)
			body = appendSection(body, tagDrift, sec)
		}
		e.mu.Unlock()
		enc.EncodeUvarint64(&body, 0)
	}
	enc.EncodeUvarint64(&b, uint64(n))
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// fits reports whether each of k's strings fits in a state file.
func fits(k measure.Key) bool {
	return len(k.Provider) <= maxKeyString && len(k.Region) <= maxKeyString && len(keyModel(k)) <= maxKeyString
}

// putCount appends a counter, clamped to [0, limit]: what a reader accepts.
func putCount(b *[]byte, v, limit int64) {
	enc.EncodeUvarint64(b, uint64(min(max(v, 0), limit)))
}

func appendSection(b []byte, tag uint64, sec []byte) []byte {
	enc.EncodeUvarint64(&b, tag)
	appendBytes(&b, sec)
	return b
}

// appendWindow appends w in Window.MarshalBinary's format, length-prefixed,
// without the sub-windows that left the window at now; scratch is reused
// between calls.
func appendWindow(b *[]byte, w *Window, now time.Time, scratch *[]byte) {
	if w.subs != nil {
		e := w.epoch(now)
		for i := range w.subs {
			if s := &w.subs[i]; s.n > 0 && !w.live(s, e) {
				c := *w // a shallow copy, to encode without the stale ones
				c.subs = slices.Clone(w.subs)
				for j := range c.subs {
					if !c.live(&c.subs[j], e) {
						c.subs[j].n = 0
					}
				}
				w = &c
				break
			}
		}
	}
	*scratch = w.appendBinary((*scratch)[:0])
	appendBytes(b, *scratch)
}

func appendEWMA(b *[]byte, e *EWMA) {
	if !e.ok {
		*b = append(*b, 0)
		return
	}
	*b = append(*b, 1)
	enc.EncodeFloat64LE(b, e.sum)
	enc.EncodeFloat64LE(b, e.weight)
	enc.EncodeVarint64(b, e.last)
}

func appendShift(b *[]byte, s *shift) {
	enc.EncodeFloat64LE(b, s.level)
	enc.EncodeFloat64LE(b, s.vari)
	enc.EncodeUvarint64(b, uint64(s.n))
	enc.EncodeUvarint64(b, uint64(s.nv))
	enc.EncodeFloat64LE(b, s.up)
	enc.EncodeFloat64LE(b, s.down)
	enc.EncodeUvarint64(b, uint64(s.upN))
	enc.EncodeUvarint64(b, uint64(s.downN))
	for _, x := range s.ring {
		enc.EncodeFloat64LE(b, x)
	}
	enc.EncodeUvarint64(b, uint64(s.next))
}

// hasData reports whether e holds a sample, recorded here or merged from
// other Registries (not only calls begun): a key SaveState writes, and
// RestoreState restores. e.mu must be held.
func (e *entry) hasData() bool {
	return e.remote != nil || slices.ContainsFunc(e.states[:], func(st *stateStats) bool { return st != nil })
}

// appendKeySection appends the tag-1 section's content. e.mu must be held.
func (e *entry) appendKeySection(b []byte, now time.Time, scratch *[]byte) []byte {
	for _, t := range []int64{e.lastSeen, e.newest, e.tpsSince, e.ttftSince} {
		enc.EncodeVarint64(&b, t)
	}
	appendEWMA(&b, &e.ttftE.e)
	appendEWMA(&b, &e.gapE)
	appendWindow(&b, &e.gaps, now, scratch)
	appendShift(&b, &e.tpsShift)
	appendShift(&b, &e.ttftShift)
	names := slices.Sorted(maps.Keys(e.classes))
	enc.EncodeUvarint64(&b, uint64(len(names)))
	for _, c := range names {
		appendString(&b, c)
		putCount(&b, e.classes[c], maxCount)
	}
	return b
}

// hasShape reports whether e has a load fit or a prompt-size class to save.
// e.mu must be held.
func (e *entry) hasShape() bool {
	return e.fit.w > 0 || e.inU.ok || slices.ContainsFunc(e.inputs[:], func(ic inputClass) bool { return ic.n > 0 })
}

// appendShapeSection appends the tag-3 section's content: the load fit on
// the load at each stream's start, the EWMA over classes and each class
// with samples. The fit on the mean load over each stream's generation and
// the slope within streams are not saved (the format predates them; they
// refill from new streams, and until then the start fit is used), nor are
// the in-flight marks (calls in flight are not). e.mu must be held.
func (e *entry) appendShapeSection(b []byte) []byte {
	f := &e.fit
	for _, v := range []float64{f.w, f.x, f.y, f.xx, f.xy, f.yy, f.v} {
		enc.EncodeFloat64LE(&b, v)
	}
	enc.EncodeVarint64(&b, f.last)
	appendEWMA(&b, &e.inU)
	var n uint64
	for i := range e.inputs {
		if e.inputs[i].n > 0 {
			n++
		}
	}
	enc.EncodeUvarint64(&b, n)
	for i := range e.inputs {
		ic := &e.inputs[i]
		if ic.n == 0 {
			continue
		}
		b = append(b, byte(i))
		appendEWMA(&b, &ic.tps)
		appendEWMA(&b, &ic.ttft)
		enc.EncodeUvarint64(&b, uint64(ic.n))
		enc.EncodeVarint64(&b, ic.newest)
	}
	return b
}

// appendSection appends a tag-2 section's content after its state byte.
func (s *stateStats) appendSection(b []byte, now time.Time, scratch *[]byte) []byte {
	for _, w := range []*Window{&s.ttft, &s.tps, &s.tpot, &s.e2e} {
		appendWindow(&b, w, now, scratch)
	}
	for _, e := range []*EWMA{&s.ttftE.e, &s.tpsE, &s.tpotE, &s.e2eE} {
		appendEWMA(&b, e)
	}
	for _, v := range s.counters() {
		putCount(&b, *v, maxCount)
	}
	return s.ring.appendTo(b, now)
}

// appendSection appends the tag-4 section's content.
func (rs *folded) appendSection(b []byte, now time.Time, scratch *[]byte) []byte {
	appendWindow(&b, &rs.ttft, now, scratch)
	appendWindow(&b, &rs.tps, now, scratch)
	for _, st := range []EWMAState{rs.ttftE, rs.tpsE} {
		e := EWMA{sum: st.Sum, weight: st.Weight, last: st.Last, ok: st.Weight > 0}
		appendEWMA(&b, &e)
	}
	for _, v := range rs.counters() {
		putCount(&b, *v, maxCount)
	}
	b = rs.ring.appendTo(b, now)
	enc.EncodeVarint64(&b, rs.newest)
	return b
}

func (rs *folded) counters() []*int64 {
	return []*int64{&rs.requests, &rs.errors, &rs.input, &rs.cached, &rs.output, &rs.cost.Dollars, &rs.cost.Picodollars}
}

// appendTo appends the ring's slots inside the window at now: a count,
// then each slot's epoch, successes and failures.
func (o *outcomeRing) appendTo(b []byte, now time.Time) []byte {
	oldest := floorDiv(now.UnixNano(), o.width) - int64(len(o.slots))
	var n uint64
	for _, s := range o.slots {
		if s.any > 0 && s.epoch > oldest {
			n++
		}
	}
	enc.EncodeUvarint64(&b, n)
	for _, s := range o.slots {
		if s.any > 0 && s.epoch > oldest {
			enc.EncodeVarint64(&b, s.epoch)
			putCount(&b, s.ok, maxOutcomes)
			putCount(&b, s.fail, maxOutcomes)
		}
	}
	return b
}

// counters lists a state's counters in file order.
func (s *stateStats) counters() []*int64 {
	return []*int64{&s.requests, &s.successes, &s.errors, &s.canceled, &s.timeouts,
		&s.byPhase[0], &s.byPhase[1], &s.byPhase[2], &s.byPhase[3], &s.byPhase[4],
		&s.input, &s.cached, &s.output, &s.reasoning, &s.cost.Dollars, &s.cost.Picodollars}
}

// RestoreState fills the Registry, which must be empty, with the statistics
// a SaveState wrote, as of now, and publishes every restored key's Estimate.
//
// Times are rebased: they are kept as saved when now is at or after the
// save, so a file saved 3 minutes ago restores windows 3 minutes older
// (sub-windows that left the window are dropped; each EWMA is weighted
// against new samples by its saved last-update time, so it has decayed by
// the 3 minutes). When the file was saved after now, every time moves back
// by that difference rounded up to whole sub-windows (RestoreInfo.Shift), so
// the state is as old as it was when saved. Keys idle for longer than
// Options.TTL at now, and keys for which keep (nil: keep all) returns false,
// are not restored. In-flight counts start at zero. Prices come from
// Options.Prices, the saved cost meters are kept.
//
// The header is read first: rd that does not begin with a state file's
// magic is ErrStateFormat after at most 5 bytes read, and another format
// version is ErrStateVersion, so a file that is not a state file is never
// read whole. Then the whole file (at most 1 GiB) is read and validated
// before the Registry changes, so on error nothing is restored. Errors wrap
// ErrStateFormat (not a state file), ErrStateVersion (another format
// version), ErrStateCorrupt (truncated, checksum, framing), ErrIncompatible
// (saved with another window length, sub-window count or accuracy),
// ErrStateNotEmpty (the Registry holds a key), or are rd's own. A key record
// that is damaged while the file is whole (a value out of range, a key
// string too long, a section or the key written twice) is skipped and
// counted in RestoreInfo.Bad, and the other keys are restored. A section of
// an unknown tag is skipped. RestoreState never panics on any input
// (FuzzRestoreState).
//
// Restored statistics land where they were: this Registry's own in Stats,
// what it had merged in Stats.Fleet. An Exporter made after RestoreState
// exports the own ones in its first Export; package fleet commits what a
// Registry holds when it joins without exporting it, since the fleet
// received those samples when they were measured, and reads the fleet's
// stream from Restored() on, since the state holds what it merged before.
//
// RestoreState is safe for concurrent use: a Record racing with it either
// comes first (and RestoreState returns ErrStateNotEmpty) or lands in the
// restored state.
func (r *Registry) RestoreState(rd io.Reader, now time.Time, keep func(measure.Key) bool) (RestoreInfo, error) {
	head, err := readStateHeader(rd)
	if err != nil {
		return RestoreInfo{}, err
	}
	if len(head) > len(stateMagic) && head[len(stateMagic)] != stateVersion {
		return RestoreInfo{}, versionError(head[len(stateMagic)])
	}
	data, err := io.ReadAll(io.LimitReader(io.MultiReader(bytes.NewReader(head), rd), maxStateBytes+1))
	if err != nil {
		return RestoreInfo{}, err
	}
	if len(data) > maxStateBytes {
		return RestoreInfo{}, fmt.Errorf("%w: larger than %d bytes", ErrStateCorrupt, maxStateBytes)
	}
	m, info, err := r.decodeState(data, now, keep)
	if err != nil {
		return RestoreInfo{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(*r.keys.Load()) != 0 {
		return RestoreInfo{}, ErrStateNotEmpty
	}
	r.keys.Store(&m)
	r.restored.Store(info.SavedAt.UnixNano() + int64(info.Shift))
	return info, nil
}

// CheckStateFile reads the first bytes of rd, at most 5, and returns nil
// when they begin a state file (of any format version), an error wrapping
// ErrStateFormat when they do not (an empty rd included), or rd's own
// error. A program that replaces a state file checks it first, so that a
// path naming another file is never overwritten (the root's
// Config.StateFile does, at every save); RestoreState checks the same
// header before it reads on.
func CheckStateFile(rd io.Reader) error {
	_, err := readStateHeader(rd)
	return err
}

// readStateHeader reads the magic and the version byte, or what rd has of
// them, and returns them, or ErrStateFormat when they are not a state
// file's beginning, or rd's error.
func readStateHeader(rd io.Reader) ([]byte, error) {
	var h [len(stateMagic) + 1]byte
	n, err := io.ReadFull(rd, h[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, err
	}
	if !bytes.HasPrefix(h[:n], []byte(stateMagic)) {
		return nil, measure.ErrStateFormat
	}
	return h[:n], nil
}

func versionError(v byte) error {
	return fmt.Errorf("%w: version %d, this package reads %d", ErrStateVersion, v, stateVersion)
}

// Restored returns the time the state RestoreState restored was saved at,
// on the restored clock (RestoreInfo.SavedAt plus RestoreInfo.Shift), and
// false when this Registry was not restored. Package fleet reads the fleet's
// stream from then on, since what it merged before is in the state.
func (r *Registry) Restored() (time.Time, bool) {
	t := r.restored.Load()
	if t == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, t), true
}

var errTruncated = errors.New("truncated")

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrStateCorrupt, fmt.Sprintf(format, args...))
}

// stateRebase moves the times of one file: shift ns and epochs sub-windows,
// with the window at now (epoch nowE) deciding what is too old.
type stateRebase struct {
	opts         measure.WindowOptions
	shift, epoch int64
	nowE         int64
}

func (rb *stateRebase) time(t int64) int64 {
	if t == 0 {
		return 0 // none
	}
	return t + rb.shift
}

// window decodes one window into dst (initialised with the Registry's
// options), rebased, without the sub-windows outside the window at now.
func (d *decoder) window(what string, dst *Window, rb *stateRebase) {
	wb := d.bytes(what, maxStateBytes)
	if d.err != nil {
		return
	}
	var w Window
	if err := w.UnmarshalBinary(wb); err != nil {
		d.fail("%s: %v", what, err)
		return
	}
	if err := compatible(w.opts, rb.opts); err != nil {
		d.fail("%s: window options differ from the file's: %v", what, err)
		return
	}
	bound := int64(maxStateTime) / w.width
	for i := range w.subs {
		if s := &w.subs[i]; s.n > 0 && (s.epoch > bound || s.epoch < -bound) {
			d.fail("%s: sub-window out of range", what)
			return
		}
	}
	if w.opts.MaxBins == dst.opts.MaxBins {
		*dst = w
	} else if err := dst.Merge(&w); err != nil { // copies, with dst's MaxBins
		d.fail("%s: %v", what, err)
		return
	}
	dst.rebase(rb.epoch, rb.nowE)
}

// rebase moves every sub-window by k epochs and drops those outside the
// window at epoch now, or older than the newest one allows. Each sub-window
// sits at its epoch modulo Buckets, so moving them all is a rotation.
func (w *Window) rebase(k, now int64) {
	if w.subs == nil {
		return
	}
	b := int64(len(w.subs))
	if k != 0 {
		subs := make([]subWindow, len(w.subs))
		for i := range w.subs {
			subs[mod(int64(i)+k, b)] = w.subs[i]
			subs[mod(int64(i)+k, b)].epoch += k
		}
		w.subs = subs
	}
	top := int64(noEpoch)
	for i := range w.subs {
		if s := &w.subs[i]; s.n > 0 {
			top = max(top, s.epoch)
		}
	}
	w.newest = noEpoch
	for i := range w.subs {
		s := &w.subs[i]
		if s.n == 0 {
			continue
		}
		if s.epoch <= now-b || s.epoch <= top-b {
			s.n, s.zero, s.sum = 0, 0, 0
			s.pos.Clear()
			continue
		}
		w.newest = max(w.newest, s.epoch)
	}
}

// ewma decodes appendEWMA's flag and fields into e, rebased.
func (d *decoder) ewma(what string, e *EWMA, rb *stateRebase) {
	switch flag := d.byte(what); {
	case d.err != nil || flag == 0:
		return
	case flag != 1:
		d.fail("%s: bad flag %d", what, flag)
		return
	}
	sum := d.float(what)
	weight := d.float(what)
	last := d.time(what)
	switch {
	case d.err != nil:
	case !(weight > 0):
		d.fail("%s: weight %g not positive", what, weight)
	case last == 0:
		d.fail("%s: no last update", what)
	default:
		e.sum, e.weight, e.last, e.ok = sum, weight, rb.time(last), true
	}
}

// shift decodes appendShift's fields into s.
func (d *decoder) shift(what string, s *shift) {
	s.level = d.float(what)
	s.slow = s.level // tag 7 holds it when it differs
	s.vari = d.float(what)
	s.n = int32(d.count(what, shiftMemory))
	s.nv = int32(d.count(what, 2*shiftMemory))
	s.up = d.float(what)
	s.down = d.float(what)
	s.upN = int32(d.count(what, math.MaxInt32))
	s.downN = int32(d.count(what, math.MaxInt32))
	for i := range s.ring {
		s.ring[i] = d.float(what)
	}
	s.next = int32(d.count(what, shiftRing-1))
	// The spread before a run of the statistics is not saved: a run in
	// progress at the save goes on from the saved spread.
	s.upVari, s.downVari, s.calm = s.vari, s.vari, s.vari
	if s.vari < 0 || s.up < 0 || s.down < 0 {
		d.fail("%s: negative statistic", what)
	}
}

// decodeState decodes and validates a whole file into a new key table.
func (r *Registry) decodeState(data []byte, now time.Time, keep func(measure.Key) bool) (map[measure.Key]*entry, RestoreInfo, error) {
	var info RestoreInfo
	if !bytes.HasPrefix(data, []byte(stateMagic)) {
		return nil, info, measure.ErrStateFormat
	}
	if len(data) < len(stateMagic)+1 {
		return nil, info, corrupt("no version: %v", errTruncated)
	}
	if v := data[len(stateMagic)]; v != stateVersion {
		return nil, info, versionError(v)
	}
	if len(data) < len(stateMagic)+1+4 {
		return nil, info, corrupt("no checksum: %v", errTruncated)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, info, corrupt("checksum mismatch (truncated or damaged)")
	}
	d := &decoder{b: body[len(stateMagic)+1:], kind: ErrStateCorrupt}
	saved := d.time("saved time")
	length := d.uvarint("window length")
	buckets := d.uvarint("buckets")
	acc := d.float("accuracy")
	d.uvarint("half-life")
	if d.err != nil {
		return nil, info, d.err
	}
	wo := r.opts.Window
	file := measure.WindowOptions{Length: time.Duration(length), Buckets: int(buckets), RelativeAccuracy: acc, MaxBins: wo.MaxBins}
	if err := compatible(file, wo); err != nil {
		return nil, info, fmt.Errorf("%w (the state file's, then this registry's)", err)
	}
	var probe Window
	probe.init(wo)
	rb := &stateRebase{opts: wo}
	t := now.UnixNano()
	if t < saved {
		rb.epoch = floorDiv(t-saved, probe.width)
		rb.shift = rb.epoch * probe.width
	}
	rb.nowE = floorDiv(t, probe.width)
	info.SavedAt = time.Unix(0, saved)
	info.Shift = time.Duration(rb.shift)

	nkeys := d.count("key count", uint64(len(d.b)))     // each key takes bytes
	m := make(map[measure.Key]*entry, min(nkeys, 1024)) // a hint only: nkeys is not trusted yet
	var dropped map[measure.Key]bool                    // keys decoded and not kept, or bad
	for range nkeys {
		k, long := d.recordKey()
		if d.err != nil {
			return nil, info, d.err
		}
		// A record that is damaged inside spoils only itself; d stays
		// framed at the next record. A framing error is the file's.
		e, err := r.decodeEntry(d, k, rb)
		if d.err != nil {
			return nil, info, fmt.Errorf("%w (key %q)", d.err, k.String())
		}
		_, kept := m[k]
		switch {
		case long:
			err = corrupt("key string longer than %d bytes", maxKeyString)
		case kept || dropped[k]:
			err = corrupt("key written twice")
			delete(m, k)
		}
		if err != nil {
			info.Bad++
			if len(info.BadKeys) < maxBadKeys {
				info.BadKeys = append(info.BadKeys, &KeyError{Key: k, Err: err})
			}
			if long {
				continue // k only names it: no key of the file can be k
			}
		}
		switch {
		case err != nil:
		case !e.hasData():
			// No cache-state or fleet section: SaveState writes no such
			// key, so restoring it would not survive the next save.
		case e.lastSeen == 0 || t-e.lastSeen > int64(r.opts.TTL):
			info.Expired++
		case keep != nil && !keep(k):
			info.Skipped++
		default:
			m[k] = e
			continue
		}
		if dropped == nil {
			dropped = map[measure.Key]bool{}
		}
		dropped[k] = true
	}
	if err := d.end(); err != nil {
		return nil, info, err
	}
	for _, e := range m {
		r.refresh(e, now) // e is not shared yet
	}
	info.Keys = len(m)
	return m, info, nil
}

// recordKey reads a key record's three strings. One longer than
// maxKeyString spoils the record but not the framing: long is then true and
// the Key names it, cut to keyNameBytes and "…".
func (d *decoder) recordKey() (k measure.Key, long bool) {
	var strs [3]string
	for i := range strs {
		b := d.bytes("key", maxStateBytes)
		if len(b) > maxKeyString {
			long = true
			strs[i] = string(b[:keyNameBytes]) + "…"
			continue
		}
		strs[i] = string(b)
	}
	model, api := splitKeyModel(strs[2])
	return measure.Key{Provider: strs[0], Region: strs[1], Model: model, API: api}, long
}

// decodeEntry decodes one key record's sections into a new entry, through
// the record's terminating 0. A section that does not decode (a value out
// of range, a section twice) spoils the record: decodeEntry reads on to the
// record's end and returns the first such error, leaving d framed at the
// next record. An error of the framing itself (a tag or a length that
// cannot be read) is d's, and the file's.
func (r *Registry) decodeEntry(d *decoder, k measure.Key, rb *stateRebase) (*entry, error) {
	e := r.newEntry(k)
	var seen [tagDrift + 1]bool // the sections read; all but tagCache come at most once
	var bad error
	for {
		tag := d.uvarint("section tag")
		if d.err != nil {
			return nil, d.err
		}
		if tag == 0 {
			if bad != nil {
				return nil, bad
			}
			return e, nil
		}
		sd := &decoder{b: d.bytes("section", maxStateBytes), kind: ErrStateCorrupt}
		if d.err != nil {
			return nil, d.err
		}
		if bad != nil {
			continue
		}
		if tag < uint64(len(seen)) {
			if seen[tag] && tag != tagCache {
				bad = corrupt("section %d twice", tag)
				continue
			}
			seen[tag] = true
		}
		switch tag {
		case tagKey:
			decodeKeySection(sd, e, rb)
		case tagCache:
			r.decodeCacheSection(sd, e, rb)
		case tagShape:
			decodeShapeSection(sd, e, rb)
		case tagFleet:
			r.decodeFleetSection(sd, e, rb)
		case tagCalm:
			if !seen[tagKey] {
				bad = corrupt("detector spreads before the key section")
				continue
			}
			decodeCalmSection(sd, e)
		case tagUsage:
			e.implausible = sd.count("implausible usage count", maxCount)
		case tagDrift:
			if !seen[tagKey] {
				bad = corrupt("detector slow levels before the key section")
				continue
			}
			for _, sh := range []*shift{&e.tpsShift, &e.ttftShift} {
				if sh.slow = sd.float("detector slow level"); math.IsNaN(sh.slow) || math.IsInf(sh.slow, 0) {
					sd.fail("detector slow level %v", sh.slow)
				}
			}
		default:
			continue // a later version's section: skipped
		}
		if err := sd.end(); err != nil {
			bad = fmt.Errorf("%w (section %d)", err, tag)
		}
	}
}

// decodeCalmSection reads tag 5: for the TPS and then the TTFT detector,
// the spread when each statistic last left 0 and the one from before the
// last change (a file without the section restores them as the saved
// spread).
func decodeCalmSection(d *decoder, e *entry) {
	for _, sh := range []*shift{&e.tpsShift, &e.ttftShift} {
		for _, p := range []*float64{&sh.upVari, &sh.downVari, &sh.calm} {
			if *p = d.float("detector spread"); *p < 0 {
				d.fail("detector spread %v", *p)
			}
		}
	}
}

func decodeKeySection(d *decoder, e *entry, rb *stateRebase) {
	for _, p := range []*int64{&e.lastSeen, &e.newest, &e.tpsSince, &e.ttftSince} {
		*p = rb.time(d.time("key time"))
	}
	d.ewma("TTFT EWMA", &e.ttftE.e, rb)
	e.ttftE.e.HalfLife = e.ttftE.HalfLife
	d.ewma("chunk-gap EWMA", &e.gapE, rb)
	d.window("chunk-gap window", &e.gaps, rb)
	d.shift("TPS detector", &e.tpsShift)
	d.shift("TTFT detector", &e.ttftShift)
	n := d.count("error classes", maxClasses)
	for range n {
		c := string(d.bytes("error class", maxClassString))
		v := d.count("error class count", maxCount)
		if d.err != nil {
			return
		}
		if e.classes == nil {
			e.classes = make(map[string]int64, n)
		}
		if _, dup := e.classes[c]; dup {
			d.fail("error class %q twice", c)
			return
		}
		e.classes[c] = v
	}
}

func decodeShapeSection(d *decoder, e *entry, rb *stateRebase) {
	f := &e.fit
	for _, p := range []*float64{&f.w, &f.x, &f.y, &f.xx, &f.xy, &f.yy, &f.v} {
		*p = d.float("load fit")
	}
	if f.w < 0 || f.x < 0 || f.y < 0 || f.xx < 0 || f.xy < 0 || f.yy < 0 || f.v < 0 {
		d.fail("load fit: negative sum")
	}
	f.last = rb.time(d.time("load fit time"))
	d.ewma("class EWMA", &e.inU, rb)
	n := d.count("prompt-size classes", InputClasses)
	for range n {
		c := d.byte("prompt-size class")
		if d.err != nil {
			return
		}
		if int(c) >= InputClasses {
			d.fail("prompt-size class %d", c)
			return
		}
		ic := &e.inputs[c]
		if ic.n > 0 {
			d.fail("prompt-size class %d twice", c)
			return
		}
		ic.tps.HalfLife, ic.ttft.HalfLife = e.inU.HalfLife, e.inU.HalfLife
		d.ewma("class TPS EWMA", &ic.tps, rb)
		d.ewma("class TTFT EWMA", &ic.ttft, rb)
		if ic.n = int32(d.count("class samples", 1<<30)); ic.n == 0 {
			d.fail("prompt-size class %d without samples", c)
		}
		ic.newest = rb.time(d.time("class newest"))
	}
}

func (r *Registry) decodeCacheSection(d *decoder, e *entry, rb *stateRebase) {
	cs := d.byte("cache state")
	if d.err != nil {
		return
	}
	if int(cs) >= len(e.states) {
		d.fail("cache state %d", cs)
		return
	}
	if e.states[cs] != nil {
		d.fail("cache state %d twice", cs)
		return
	}
	st := r.newState()
	for _, w := range []*Window{&st.ttft, &st.tps, &st.tpot, &st.e2e} {
		d.window("window", w, rb)
	}
	for _, ew := range []*EWMA{&st.ttftE.e, &st.tpsE, &st.tpotE, &st.e2eE} {
		d.ewma("EWMA", ew, rb)
	}
	st.ttftE.e.HalfLife = st.ttftE.HalfLife
	for _, p := range st.counters() {
		*p = d.count("counter", maxCount)
	}
	if st.cost.Picodollars >= picoPerDollar {
		d.fail("picodollars out of range")
	}
	d.ring(&st.ring, rb)
	e.states[cs] = st
}

// ring decodes outcomeRing.appendTo's slots into o, rebased, without those
// outside the window at now.
func (d *decoder) ring(o *outcomeRing, rb *stateRebase) {
	n := d.count("outcome slots", uint64(len(o.slots)))
	bound := int64(maxStateTime) / o.width
	for range n {
		ep := d.varint("outcome epoch")
		ok := d.count("outcome count", maxOutcomes)
		fail := d.count("outcome count", maxOutcomes)
		if ep > bound || ep < -bound {
			d.fail("outcome epoch out of range")
		}
		if d.err != nil {
			return
		}
		if ep += rb.epoch; ep <= rb.nowE-int64(len(o.slots)) || ok+fail == 0 {
			continue // outside the window at now
		}
		s := &o.slots[mod(ep, int64(len(o.slots)))]
		if s.any > 0 {
			d.fail("outcome epoch twice")
			return
		}
		*s = outcomeSlot{epoch: ep, ok: ok, fail: fail, any: ok + fail}
	}
}

func (r *Registry) decodeFleetSection(d *decoder, e *entry, rb *stateRebase) {
	rs := newFolded(r.opts.Window)
	d.window("fleet TTFT window", &rs.ttft, rb)
	d.window("fleet TPS window", &rs.tps, rb)
	for _, st := range []*EWMAState{&rs.ttftE, &rs.tpsE} {
		var ew EWMA
		d.ewma("fleet EWMA", &ew, rb)
		*st = ew.state()
	}
	for _, p := range rs.counters() {
		*p = d.count("fleet counter", maxCount)
	}
	if rs.cost.Picodollars >= picoPerDollar {
		d.fail("fleet picodollars out of range")
	}
	d.ring(&rs.ring, rb)
	rs.newest = rb.time(d.time("fleet newest"))
	e.remote = rs
}
