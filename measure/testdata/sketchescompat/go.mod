// Module sketchescompat checks that the sub-window sketches of internal/registry's Window
// decode with DataDog's sketches-go. It is a module of its own because
// sketches-go's ddsketch package imports google.golang.org/protobuf, which
// the tpsroute module does not require. Run: go test ./... from this folder.
module github.com/tpsroute/tpsroute/measure/testdata/sketchescompat

go 1.26.0

require (
	github.com/DataDog/sketches-go v1.4.8
	github.com/tpsroute/tpsroute v0.0.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/openai/openai-go/v3 v3.99.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/tpsroute/tpsroute => ../../..
