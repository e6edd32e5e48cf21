package replay

import (
	"bytes"

	"github.com/tpsroute/tpsroute/internal/sse"
)

// canonical returns the cassette event for block: data or comment when
// rendering it reproduces the block byte for byte, raw otherwise.
func canonical(block []byte) (kind eventKind, name, data string) {
	ev := sse.ParseEvent(block)
	e := event{kind: eventRaw}
	switch {
	case ev.OnlyComment:
		e = event{kind: eventComment, data: ev.Comment}
	case ev.HasData:
		e = event{kind: eventData, name: ev.Name, data: ev.Data}
	}
	if e.kind != eventRaw && bytes.Equal(e.bytes(), block) {
		return e.kind, e.name, e.data
	}
	return eventRaw, "", string(block)
}
