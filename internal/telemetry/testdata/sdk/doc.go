// Package sdk tests tpsroute's telemetry through the OpenTelemetry SDK: the
// metrics through a ManualReader and the spans through a SpanRecorder. It is a
// module of its own so that the SDK never enters the core module's go.mod.
package sdk
