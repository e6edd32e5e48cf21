package registry

import (
	"fmt"
	"math"
	"strings"

	enc "github.com/DataDog/sketches-go/ddsketch/encoding"

	"github.com/tpsroute/tpsroute/measure"
)

// The binary formats of this package (Window.MarshalBinary,
// Delta.MarshalBinary and state files, docs/STATE.md) are made of the same
// pieces: the varints and little-endian float64s of sketches-go's encoding
// package, and byte strings prefixed with their length as a uvarint.

func appendBytes(b *[]byte, v []byte) {
	enc.EncodeUvarint64(b, uint64(len(v)))
	*b = append(*b, v...)
}

func appendString(b *[]byte, s string) {
	enc.EncodeUvarint64(b, uint64(len(s)))
	*b = append(*b, s...)
}

// appendKey appends k's provider, region and model; the model string of a
// key with an API is "model\x00api" (a chat key's, without one, is as it was
// before keys had an API, so older files read as chat).
func appendKey(b *[]byte, k measure.Key) {
	for _, s := range []string{k.Provider, k.Region, keyModel(k)} {
		appendString(b, s)
	}
}

// keyModel returns the model string appendKey writes for k.
func keyModel(k measure.Key) string {
	if k.API == "" {
		return k.Model
	}
	return k.Model + "\x00" + k.API
}

// splitKeyModel undoes keyModel: the model and API of a key's model string.
func splitKeyModel(s string) (model, api string) {
	if i := strings.LastIndexByte(s, 0); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// decoder reads those pieces from b. Its first error sticks: every later
// read returns a zero value and leaves err as it is, so a decoding function
// reads a run of fields and checks err once, before it acts on them. Every
// error wraps kind (ErrStateCorrupt or ErrEncoding) and names the field
// being read (what).
type decoder struct {
	b    []byte
	kind error
	err  error
}

// fail records an error, unless one is recorded already.
func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", d.kind, fmt.Sprintf(format, args...))
	}
}

// read decodes one value with dec, unless an error is recorded already;
// the zero value on error.
func read[T any](d *decoder, what string, dec func(*[]byte) (T, error)) T {
	var zero T
	if d.err != nil {
		return zero
	}
	v, err := dec(&d.b)
	if err != nil {
		d.fail("%s: %v", what, err)
		return zero
	}
	return v
}

func (d *decoder) uvarint(what string) uint64 { return read(d, what, enc.DecodeUvarint64) }

func (d *decoder) varint(what string) int64 { return read(d, what, enc.DecodeVarint64) }

// count decodes a non-negative int64 at most limit.
func (d *decoder) count(what string, limit uint64) int64 {
	v := d.uvarint(what)
	if v > limit {
		d.fail("%s %d out of range", what, v)
		return 0
	}
	return int64(v)
}

// time decodes a UnixNano time within ±maxStateTime.
func (d *decoder) time(what string) int64 {
	v := d.varint(what)
	if v > maxStateTime || v < -maxStateTime {
		d.fail("%s out of range", what)
		return 0
	}
	return v
}

// float decodes a finite float64.
func (d *decoder) float(what string) float64 {
	v := read(d, what, enc.DecodeFloat64LE)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail("%s not finite", what)
		return 0
	}
	return v
}

// bytes decodes a length-prefixed byte string of at most limit bytes. The
// result shares d's bytes.
func (d *decoder) bytes(what string, limit uint64) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("%s: %v", what, errTruncated)
		return nil
	}
	if n > limit {
		d.fail("%s longer than %d bytes", what, limit)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("%s: %v", what, errTruncated)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// key decodes appendKey's strings, each of at most limit bytes.
func (d *decoder) key(limit uint64) measure.Key {
	var strs [3]string
	for i := range strs {
		strs[i] = string(d.bytes("key", limit))
	}
	model, api := splitKeyModel(strs[2])
	return measure.Key{Provider: strs[0], Region: strs[1], Model: model, API: api}
}

// end checks that every byte was read, and returns d's error.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
