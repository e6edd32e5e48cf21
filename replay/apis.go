package replay

import (
	"strconv"
	"strings"
)

// This file renders the Responses and Messages styles (Profile.Style
// Responses, Messages): the same answer, tokens and timing as every other
// style, in those APIs' event shapes.

// named appends one named data event at the current time.
func (e *emitter) named(name, data string, output bool) {
	e.pl.events = append(e.pl.events, event{at: e.at, kind: eventData, name: name, data: data, output: output})
}

// streamResponses appends an OpenAI Responses stream of the answer pieces.
func (e *emitter) streamResponses(pieces []string, finish string, u usage, id string) {
	seq := 0
	ev := func(typ, rest string, output bool) {
		e.named(typ, `{"type":"`+typ+`","sequence_number":`+strconv.Itoa(seq)+rest+`}`, output)
		seq++
	}
	model := jsonString(e.c.model)
	resp := func(status, usage, extra string) string {
		return `,"response":{"id":"` + id + `","object":"response","created_at":` + strconv.FormatInt(e.c.created, 10) +
			`,"status":"` + status + `","model":` + model + `,"output":` + extra + `,"error":null,"usage":` + usage + `}`
	}
	item := `"item_id":"msg_` + id + `","output_index":0,"content_index":0`
	ev("response.created", resp("in_progress", "null", "[]"), false)
	ev("response.in_progress", resp("in_progress", "null", "[]"), false)
	ev("response.output_item.added", `,"output_index":0,"item":{"id":"msg_`+id+`","type":"message","status":"in_progress","content":[],"role":"assistant"}`, false)
	ev("response.content_part.added", ","+item+`,"part":{"type":"output_text","annotations":[],"text":""}`, false)
	for i := 0; i < len(pieces); i += e.per {
		if i > 0 {
			e.gap()
		}
		ev("response.output_text.delta", ","+item+`,"delta":`+jsonString(strings.Join(pieces[i:min(i+e.per, len(pieces))], ""))+`,"logprobs":[]`, true)
	}
	text := jsonString(strings.Join(pieces, ""))
	part := `{"type":"output_text","annotations":[],"text":` + text + `}`
	message := `{"id":"msg_` + id + `","type":"message","status":"completed","role":"assistant","content":[` + part + `]}`
	ev("response.output_text.done", ","+item+`,"text":`+text+`,"logprobs":[]`, false)
	ev("response.content_part.done", ","+item+`,"part":`+part, false)
	ev("response.output_item.done", `,"output_index":0,"item":`+message, false)
	usage := `{"input_tokens":` + strconv.Itoa(u.prompt) + `,"input_tokens_details":{"cached_tokens":` + strconv.Itoa(u.cached) +
		`},"output_tokens":` + strconv.Itoa(u.completion) + `,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":` + strconv.Itoa(u.prompt+u.completion) + `}`
	if finish == "length" {
		r := resp("incomplete", usage, "["+message+"]")
		ev("response.incomplete", r[:len(r)-1]+`,"incomplete_details":{"reason":"max_output_tokens"}}`, false)
		return
	}
	ev("response.completed", resp("completed", usage, "["+message+"]"), false)
}

// streamMessages appends an Anthropic Messages stream of the answer pieces.
func (e *emitter) streamMessages(pieces []string, finish string, u usage, id string) {
	e.named("message_start", `{"type":"message_start","message":{"id":"`+id+`","type":"message","role":"assistant","content":[],"model":`+jsonString(e.c.model)+
		`,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+strconv.Itoa(u.prompt-u.cached)+
		`,"cache_creation_input_tokens":0,"cache_read_input_tokens":`+strconv.Itoa(u.cached)+`,"output_tokens":1}}}`, false)
	ping := func() { e.named("ping", `{"type": "ping"}`, false) }
	ping()
	e.named("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`, false)
	for i := 0; i < len(pieces); i += e.per {
		if i > 0 {
			e.gap()
		}
		text := jsonString(strings.Join(pieces[i:min(i+e.per, len(pieces))], ""))
		e.named("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+text+`}}`, true)
		if i == 0 {
			ping()
		}
	}
	stop := "end_turn"
	if finish == "length" {
		stop = "max_tokens"
	}
	e.named("content_block_stop", `{"type":"content_block_stop","index":0}`, false)
	e.named("message_delta", `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":`+strconv.Itoa(u.completion)+`}}`, false)
	e.named("message_stop", `{"type":"message_stop"}`, false)
}
