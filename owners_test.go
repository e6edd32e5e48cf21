package tpsroute

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tpsroute/tpsroute/measure"
)

// TestOwnersBounded: the map holds at most max ids, forgets the oldest
// first, and a put of a known id moves nothing.
func TestOwnersBounded(t *testing.T) {
	o := newOwners(3)
	k := func(p string) measure.Key { return measure.Key{Provider: p, Model: "m", API: "responses"} }
	for i := range 5 {
		o.put("resp_"+strconv.Itoa(i), k(strconv.Itoa(i)))
	}
	o.put("resp_3", k("x")) // known: updated in place, nothing forgotten
	for i, want := range []bool{false, false, true, true, true} {
		got, ok := o.get("resp_" + strconv.Itoa(i))
		assert.Equal(t, want, ok, "resp_%d", i)
		if ok && i != 3 {
			assert.Equal(t, k(strconv.Itoa(i)), got)
		}
	}
	got, _ := o.get("resp_3")
	assert.Equal(t, k("x"), got)
	assert.Len(t, o.m, 3)
	assert.Len(t, o.ring, 3)
	o.put("resp_5", k("5"))
	_, ok := o.get("resp_2")
	assert.False(t, ok, "the oldest goes first")
}

// TestOwnersRefusesLongIDs: an id past maxOwnedID bytes, which an upstream
// or a caller may send, is not kept, so the map's memory is bounded by its
// count; one at the bound is kept.
func TestOwnersRefusesLongIDs(t *testing.T) {
	o := newOwners(3)
	k := measure.Key{Provider: "p", Model: "m", API: "responses"}
	atBound, past := strings.Repeat("r", maxOwnedID), strings.Repeat("r", maxOwnedID+1)
	o.put(past, k)
	o.put(atBound, k)
	_, ok := o.get(past)
	assert.False(t, ok)
	_, ok = o.get(atBound)
	assert.True(t, ok)
	assert.Len(t, o.ring, 1)
}
