package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// otelSDK is the gateway's OpenTelemetry SDK: a MeterProvider read by the
// Prometheus exporter behind GET /metrics and, with -otlp, a TracerProvider
// that exports spans over OTLP/HTTP.
type otelSDK struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider // nil without -otlp: the global no-op
	metrics http.Handler         // GET /metrics
	stop    []func(context.Context) error
}

// newTelemetry sets up the SDK. otlp, when not empty, is the OTLP/HTTP
// endpoint URL of a collector (http://127.0.0.1:4318, say).
func newTelemetry(ctx context.Context, otlp string) (*otelSDK, error) {
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tpsroute-gateway"))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("gateway: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	t := &otelSDK{meters: mp, metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), stop: []func(context.Context) error{mp.Shutdown}}
	if otlp != "" {
		te, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(otlp))
		if err != nil {
			return nil, fmt.Errorf("gateway: -otlp: %w", err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(te), sdktrace.WithResource(res))
		t.tracers = tp
		t.stop = append(t.stop, tp.Shutdown)
	}
	return t, nil
}

// shutdown flushes and stops the providers.
func (t *otelSDK) shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.stop {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
