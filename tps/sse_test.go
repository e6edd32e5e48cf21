package tps

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSSEFraming is the table of the one SSE framer: where the first and the
// last complete event blocks end, and what ParseEvent and ForEachData read,
// for LF, CRLF and CR line ends and the quirks providers send.
func TestSSEFraming(t *testing.T) {
	tests := []struct {
		name  string
		b     string
		first int      // EventEnd
		last  int      // LastEventEnd(b, -1)
		data  []string // ForEachData
	}{
		{"lf", "data: a\n\ndata: b", 9, 9, []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b", 11, 11, []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b", 9, 9, []string{"a", "b"}},
		{"mixed", "data: a\r\n\ndata: b\r\r", 10, 19, []string{"a", "b"}},
		{"none", "data: a\ndata: b", -1, -1, []string{"a\nb"}},
		{"two", "data: a\n\ndata: b\n\n", 9, 18, []string{"a", "b"}},
		{"no space, done", "data:a\n\ndata: [DONE]\n\n", 8, 22, []string{"a"}},
		{"stray blank line joins the next block", "\ndata: a\n\n", 10, 10, []string{"a"}},
		{"comment then data", ": ping\n\ndata: a\n\n", 8, 17, []string{"a"}},
		{"cr at the end of the buffer ends the line", "data: a\r\n\r", 10, 10, []string{"a"}},
		{"empty", "", -1, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.first, EventEnd([]byte(tt.b)), "EventEnd")
			assert.Equal(t, tt.last, LastEventEnd([]byte(tt.b), -1), "LastEventEnd")
			var got []string
			ForEachData([]byte(tt.b), func(d []byte) { got = append(got, string(d)) })
			assert.Equal(t, tt.data, got, "ForEachData")
		})
	}

	events := []struct {
		name  string
		block string
		want  Event
	}{
		{"data", "data: {\"x\":1}\n\n", Event{Data: `{"x":1}`, HasData: true}},
		{"named, multi-line, crlf", "event: error\r\ndata: a\r\ndata:b\r\n\r\n", Event{Name: "error", Data: "a\nb", HasData: true}},
		{"cr only", "data: a\rdata: b\r\r", Event{Data: "a\nb", HasData: true}},
		{"comments only", ": ping\n:pong\n\n", Event{Comment: "ping\npong", OnlyComment: true}},
		{"comment beside data", ": ping\ndata: a\n\n", Event{Data: "a", HasData: true}},
		{"id and retry ignored", "id: 7\nretry: 10\n\n", Event{}},
		{"done is data", "data: [DONE]\n\n", Event{Data: "[DONE]", HasData: true}},
	}
	for _, tt := range events {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ParseEvent([]byte(tt.block)))
		})
	}
}
