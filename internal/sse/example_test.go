package sse_test

import (
	"fmt"
	"strings"

	"github.com/tpsroute/tpsroute/internal/sse"
)

func ExampleForEachData() {
	body := []byte("data: {\"a\":1}\r\r: keep-alive\n\ndata: line one\ndata: line two\n\ndata: [DONE]\n\n")
	sse.ForEachData(body, func(data []byte) { fmt.Printf("%q\n", data) })
	// Output:
	// "{\"a\":1}"
	// "line one\nline two"
}

func ExampleEventReader() {
	var d sse.EventReader
	d.Reset(strings.NewReader("event: error\ndata: {}\n\ndata: x"), 0)
	for d.Next() {
		fmt.Printf("%q %q\n", d.Name(), d.Data())
	}
	fmt.Println(d.Err())
	// Output:
	// "error" "{}"
	// "" "x"
	// <nil>
}

func ExampleAppendEvent() {
	framed := sse.AppendEvent(nil, []byte("{\n\"data\": []}"))
	fmt.Printf("%q %d\n", framed, sse.EventEnd(framed))
	// Output:
	// "data: {\ndata: \"data\": []}\n\n" 27
}
