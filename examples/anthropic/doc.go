// Package anthropic checks that Anthropic's Go SDK, anthropic-sdk-go v2,
// pointed at tpsroute's Transport through its HTTP-client option
// (option.WithHTTPClient), has its Messages calls routed, failed over and
// measured by tpsroute: streaming and not, with the deployments' own
// x-api-key, and a stream cut mid-answer continued by assistant prefill
// into one message. It is a nested module so that the SDK stays out of tpsroute's
// own go.mod; it has tests only.
package anthropic
