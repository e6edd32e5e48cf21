// Package replaytest gives tests recorded provider streams with one call:
// RecordOnce replays a cassette when its file exists and records one, redacted,
// from the real provider when it does not (go-vcr's ModeRecordOnce).
//
// It lives apart from replay so that replay, which programs such as the
// quickstart link, does not import package testing. Like the rest of
// tpsroute it reads no environment variable: the switch that forces a new
// recording is a parameter, and a test spells its own, for example
//
//	url := replaytest.RecordOnce(t, "testdata/hello.json", "https://api.openai.com/v1", os.Getenv("REPLAY_RECORD") != "")
//
// It is for the tests of programs built on tpsroute (docs/CASSETTE.md,
// "Record once in tests"); no package of the module imports it. Every URL it
// returns is on 127.0.0.1. A replayed call never leaves the machine; a
// recorded one goes only to the base URL the test names. A cassette holds
// the values of the Authorization, Api-Key and X-Api-Key headers and of
// cookies redacted, and its file is written only for one call that answered
// 200 and ended cleanly.
package replaytest
