package executor

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMsgSplicePass: a continuation's events as the caller reads them, in
// the framings a stream may use: CRLF line ends, a data field split over
// several lines, comments, a final event without its blank line.
func TestMsgSplicePass(t *testing.T) {
	tests := []struct {
		name string
		sp   msgSplice
		in   string
		want string
	}{
		{name: "first run: unchanged",
			sp:   msgSplice{},
			in:   "event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
			want: "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"},
		{name: "CRLF, message_start and the joined start dropped",
			sp:   msgSplice{cont: true, joined: true, shift: 1, next: 2, open: true},
			in:   "event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\nevent: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\r\n\r\nevent: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\r\n\r\n",
			want: "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\r\n\r\n"},
		{name: "data over two lines, rewritten",
			sp:   msgSplice{cont: true, held: " "},
			in:   ": note\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\" y\"}}\n\n",
			want: ": note\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\ndata: \"delta\":{\"type\":\"text_delta\",\"text\":\"y\"}}\n\n"},
		{name: "a delta of held whitespace only is dropped, a final event kept",
			sp:   msgSplice{cont: true, held: "\n\n"},
			in:   "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\\n\"}}\n\nevent: ping\ndata: {\"type\":\"ping\"}",
			want: "event: ping\ndata: {\"type\":\"ping\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp := tt.sp
			out, changed := sp.pass([]byte(tt.in))
			assert.Equal(t, tt.want, string(out))
			assert.Equal(t, tt.in != tt.want, changed)
		})
	}
}

// TestDropHeld: the held whitespace is matched byte by byte across texts
// until the continuation goes its own way.
func TestDropHeld(t *testing.T) {
	for _, tt := range []struct{ held, text, rest, left string }{
		{" ", " w6 ", "w6 ", ""},
		{"\n\n", "\n", "", "\n"},
		{"\n\n", "\nNext", "Next", ""},
		{"\n\n", " Next", " Next", ""},
		{" ", "", "", " "},
	} {
		rest, left := dropHeld(tt.held, tt.text)
		assert.Equal(t, tt.rest, rest, "%q %q", tt.held, tt.text)
		assert.Equal(t, tt.left, left, "%q %q", tt.held, tt.text)
	}
}
