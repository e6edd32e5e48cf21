package payload_test

import (
	"fmt"

	"github.com/tpsroute/tpsroute/internal/payload"
)

func ExampleParseChunk() {
	var c payload.Chunk
	err := payload.ParseChunk([]byte(`{"choices":[{"index":0,"delta":{"content":"caf\u00e9"}}]}`), &c)
	fmt.Println(err, c.Output, string(c.Content), string(c.AppendText(nil)))
	// Output:
	// <nil> true caf\u00e9 café
}

func ExampleParseErrorBody() {
	eb := payload.ParseErrorBody([]byte(`{"error":{"message":"Rate limit","code":429}}`))
	fmt.Println(eb.Code, eb.Message)
	// Output:
	// 429 Rate limit
}

// AppendQuoted writes a JSON string as encoding/json does, without HTML
// escapes and without allocating beyond dst; AppendUnescaped reads it back.
func ExampleAppendQuoted() {
	q := payload.AppendQuoted(nil, "say \"hi\"\n<b>")
	fmt.Println(string(q))
	fmt.Println(string(payload.AppendUnescaped(nil, q[1:len(q)-1])))
	// Output:
	// "say \"hi\"\n<b>"
	// say "hi"
	// <b>
}
