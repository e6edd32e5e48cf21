// Package readme holds no code: its test runs the commands of the
// repository's README.md that work offline and checks each one's exit status
// and documented last line. The test takes about two minutes, so it runs only
// with TPSROUTE_README_CHECK=1 (.ci/run sets it); plain `go test ./...`
// skips it.
package readme
