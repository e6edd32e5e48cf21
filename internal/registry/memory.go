package registry

import "unsafe"

// Heap accounting, for tests and benchmarks: the bytes a key's statistics
// hold, counted from struct sizes and slice capacities (map overhead for
// error classes is estimated).

func (s *compactStore) memBytes() int {
	if s.wide != nil {
		return 24 + 4*cap(*s.wide)
	}
	return 2 * cap(s.narrow)
}

func (w *Window) memBytes() int {
	n := cap(w.subs) * int(unsafe.Sizeof(subWindow{}))
	for i := range w.subs {
		n += w.subs[i].pos.memBytes()
	}
	return n
}

func (e *entry) memBytes() int {
	n := int(unsafe.Sizeof(*e)) + int(unsafe.Sizeof(published{})) + e.gaps.memBytes()
	for _, st := range e.states {
		if st == nil {
			continue
		}
		n += int(unsafe.Sizeof(*st)) + cap(st.ring.slots)*int(unsafe.Sizeof(outcomeSlot{}))
		for _, w := range []*Window{&st.ttft, &st.tps, &st.tpot, &st.e2e} {
			n += w.memBytes()
		}
	}
	for k := range e.classes {
		n += len(k) + 48
	}
	return n
}
