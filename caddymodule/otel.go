package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/otlpexport"
)

// OTel is the app's otel block: where the capsules' OpenTelemetry spans are exported
// (docs/operators.md "Traces").
type OTel struct {
	// Endpoint is the OTLP receiver: http://host:port or https://… for OTLP/HTTP
	// (/v1/traces is appended to a URL with no path), grpc://host:port (plain) or
	// grpcs://host:port (TLS) for OTLP/gRPC. It may hold placeholders.
	Endpoint string `json:"endpoint,omitempty"`
	// Headers are sent with every export (an API key); values may hold placeholders.
	Headers map[string]string `json:"headers,omitempty"`
	// Sampling is the share of traces kept when no caller decided (0 to 1; default 1).
	// A trace whose caller sampled it, or not, follows the caller.
	Sampling *float64 `json:"sampling,omitempty"`
}

// tracers are the exporters' tracer providers by endpoint, headers and sampling: shared
// by the configs a reload leaves running, shut down (flushing) once none holds one.
var tracers = caddy.NewUsagePool()

// pooledTracer is a tracer provider in the pool.
type pooledTracer struct{ *sdktrace.TracerProvider }

// Destruct flushes and stops the provider, waiting at most five seconds for the receiver.
func (p pooledTracer) Destruct() error { return otlpexport.Shutdown(p.TracerProvider) }

// checkEndpoint refuses an endpoint that is not an OTLP URL this release exports to.
func checkEndpoint(what, endpoint string) error {
	if why := otlpexport.Valid(endpoint); why != "" {
		return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("%s %q is not an OTLP endpoint: %s", what, endpoint, why),
			"write http://host:4318 or https://… for OTLP/HTTP, grpc://host:4317 or grpcs://… for OTLP/gRPC, with credentials in headers rather than the URL")
	}
	return nil
}

// acquireTracer returns the pooled provider for spec, and the key that releases it.
func acquireTracer(spec otlpexport.Spec) (trace.TracerProvider, string, error) {
	key := spec.Key()
	v, _, err := tracers.LoadOrNew(key, func() (caddy.Destructor, error) {
		tp, err := otlpexport.NewProvider(spec)
		if err != nil {
			return nil, errs.Wrap(err, CodeAppConfig, "caddy", fmt.Sprintf("cannot export traces to %q", spec.Endpoint), "check the otel endpoint")
		}
		return pooledTracer{tp}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return v.(pooledTracer).TracerProvider, key, nil
}

// tracerSpec is the app's otel block with placeholders replaced, or false without one.
func (a *App) tracerSpec() (otlpexport.Spec, bool) {
	if a.OTel == nil || a.OTel.Endpoint == "" {
		return otlpexport.Spec{}, false
	}
	repl := caddy.NewReplacer()
	spec := otlpexport.Spec{Endpoint: repl.ReplaceAll(a.OTel.Endpoint, ""), Headers: map[string]string{}, Sampling: 1, Instance: a.instance()}
	for k, v := range a.OTel.Headers {
		spec.Headers[k] = repl.ReplaceAll(v, "")
	}
	if a.OTel.Sampling != nil {
		spec.Sampling = *a.OTel.Sampling
	}
	return spec, true
}

// capsuleTracer is the tracer provider a capsule's spans go to: its manifest's
// observability.otel_endpoint (with the app's sampling, without its headers, which are
// the app's receiver's), else the app's otel block; nil, "" with neither.
func (a *App) capsuleTracer(manifestEndpoint string) (trace.TracerProvider, string, error) {
	spec, ok := a.tracerSpec()
	if manifestEndpoint != "" {
		sampling := 1.0
		if ok {
			sampling = spec.Sampling
		}
		spec, ok = otlpexport.Spec{Endpoint: manifestEndpoint, Sampling: sampling, Instance: a.instance()}, true
	}
	if !ok {
		return nil, "", nil
	}
	return acquireTracer(spec)
}

// validateOTel checks the otel block as written (placeholders are checked once replaced,
// when a capsule acquires its tracer).
func (o *OTel) validate() errs.List {
	var list errs.List
	if o.Endpoint == "" {
		list = append(list, errs.New(CodeAppConfig, "caddy", "otel has no endpoint", "write endpoint http://host:4318 (OTLP/HTTP) or grpc://host:4317 (OTLP/gRPC), or remove otel"))
	} else if !strings.Contains(o.Endpoint, "{") {
		if err := checkEndpoint("otel endpoint", o.Endpoint); err != nil {
			list = append(list, err.(*errs.Error))
		}
	}
	if s := o.Sampling; s != nil && (*s < 0 || *s > 1) {
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("otel sampling %s is outside 0 to 1", strconv.FormatFloat(*s, 'g', -1, 64)),
			"write the share of traces to keep, such as 1 (all) or 0.01"))
	}
	return list
}
