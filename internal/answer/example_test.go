package answer_test

import (
	"fmt"

	"github.com/tpsroute/tpsroute/internal/answer"
)

func ExampleAccumulator() {
	var acc answer.Accumulator
	for _, data := range []string{
		`{"id":"c1","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`,
		`{"id":"c1","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`,
		`{"id":"c1","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
	} {
		acc.Add([]byte(data))
	}
	fmt.Println(string(acc.JSON()))
	// Output:
	// {"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}
}

func ExampleResponsesAnswer() {
	stream := []byte("event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\",\"status\":\"in_progress\"}}\n\n" +
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r1\",\"status\":\"completed\"}}\n\n")
	body, err := answer.ResponsesAnswer(stream)
	fmt.Println(string(body), err)
	// Output:
	// {"id":"r1","status":"completed"} <nil>
}
