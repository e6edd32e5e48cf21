// Package jsoncheck validates JSON text in one pass, without recursion, and
// refuses nesting deeper than MaxDepth. It is the one check that a caller's
// bytes pass before any recursive parser (gjson, sjson, encoding/json) sees
// them: a body of a few megabytes of '[' costs a recursive validator one
// stack frame per bracket (about 900 MiB of goroutine stack for 4 MiB), and
// this one a fixed 16 bytes.
//
// The grammar is RFC 8259's, the one gjson.Valid accepts: UTF-8 is not
// checked, and nothing but the value and white space may follow it.
//
// # Users
//
// The root package checks every request body with Valid before gjson reads
// its fields, and answers a *tpsroute.RequestError for a body that fails;
// package config checks a config file's depth before encoding/json decodes
// it, and reports the line; examples/gateway checks each body before gjson
// reads its routing directives; internal/executor checks a provider's raw
// error body before encoding/json decodes it into an *openai.Error. The
// package is internal because it guards the module's own parsers; callers
// never call it.
//
// Valid is a pure function, safe for concurrent use; an *Error is a value.
package jsoncheck
