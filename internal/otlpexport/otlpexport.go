// Package otlpexport makes the tracer providers the gateway and `caddy capsule run`
// export OpenTelemetry spans with: OTLP over HTTP or gRPC, chosen by the endpoint's
// scheme (docs/operators.md "Traces").
package otlpexport

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Spec is one exporter's settings.
type Spec struct {
	// Endpoint is http(s)://host:port[/path] for OTLP/HTTP (/v1/traces when no path is
	// given), grpc://host:port (plain) or grpcs://host:port (TLS) for OTLP/gRPC.
	Endpoint string
	Headers  map[string]string
	Sampling float64 // the share of traces kept when the caller did not decide
	Instance string  // service.instance.id
}

// Valid reports why endpoint cannot be exported to, or "".
func Valid(endpoint string) string {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Host == "":
		return "it is not a URL with a host"
	case u.User != nil:
		return "credentials belong in headers, not in the URL"
	}
	switch u.Scheme {
	case "http", "https", "grpc", "grpcs":
		return ""
	}
	return fmt.Sprintf("the scheme %q is none of http, https, grpc, grpcs", u.Scheme)
}

// NewProvider returns a tracer provider batching spans to spec's endpoint, its
// resource service.name capsulegate; Shutdown flushes it.
func NewProvider(spec Spec) (*sdktrace.TracerProvider, error) {
	if why := Valid(spec.Endpoint); why != "" {
		return nil, fmt.Errorf("otlp endpoint %q: %s", spec.Endpoint, why)
	}
	u, _ := url.Parse(spec.Endpoint)
	ctx := context.Background()
	var exp *otlptrace.Exporter
	var err error
	switch u.Scheme {
	case "grpc", "grpcs":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host), otlptracegrpc.WithHeaders(spec.Headers)}
		if u.Scheme == "grpc" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		if u.Path == "" || u.Path == "/" {
			u.Path = "/v1/traces"
		}
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()), otlptracehttp.WithHeaders(spec.Headers))
	}
	if err != nil {
		return nil, fmt.Errorf("otlp endpoint %q: %w", spec.Endpoint, err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("capsulegate"), semconv.ServiceInstanceID(spec.Instance))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(spec.Sampling)))), nil
}

// Key names spec in a pool of providers: equal settings, one provider.
func (s Spec) Key() string {
	keys := make([]string, 0, len(s.Headers))
	for k := range s.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\x00%g\x00%s", s.Endpoint, s.Sampling, s.Instance)
	for _, k := range keys {
		fmt.Fprintf(&b, "\x00%s=%s", k, s.Headers[k])
	}
	return b.String()
}

// Shutdown flushes and stops tp, waiting at most five seconds for the receiver.
func Shutdown(tp *sdktrace.TracerProvider) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return tp.Shutdown(ctx)
}
