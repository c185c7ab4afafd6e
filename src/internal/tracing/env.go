package tracing

import (
	"fmt"
	"strconv"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OpenTelemetry environment variables this package reads itself; the
// SDK and the OTLP exporter read the others (the README lists them).
const (
	envDisabled       = "OTEL_SDK_DISABLED"
	envExporter       = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSampler        = "OTEL_TRACES_SAMPLER"
	envSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	envMaxQueueSize   = "OTEL_BSP_MAX_QUEUE_SIZE"
)

// settings are what the environment says of tracing, as far as this
// package decides it.
type settings struct {
	on       bool // an OTLP endpoint is set, and nothing turns tracing off
	maxQueue int  // spans ended and not yet exported, at most
}

// samplers are the values of OTEL_TRACES_SAMPLER the SDK knows; it would
// fall back to its default for any other, quietly.
var samplers = map[string]bool{
	"always_on": true, "always_off": true, "traceidratio": true,
	"parentbased_always_on": true, "parentbased_always_off": true, "parentbased_traceidratio": true,
}

// readSettings reads the variables that decide whether tracing is on and
// how many spans wait for export, and checks the values the SDK would
// otherwise replace by its defaults without a word: a bad value is an error
// that names its variable, as a bad COLLAPSER_* value is.
func readSettings(getenv func(string) string) (settings, error) {
	value := func(name string) string { return strings.ToLower(strings.TrimSpace(getenv(name))) }
	s := settings{maxQueue: sdktrace.DefaultMaxQueueSize}
	switch v := value(envDisabled); v {
	case "", "false":
	case "true":
		return s, nil
	default:
		return s, fmt.Errorf("%s=%q: want true or false", envDisabled, getenv(envDisabled))
	}
	switch v := value(envExporter); v {
	case "", "otlp":
	case "none":
		return s, nil
	default:
		return s, fmt.Errorf("%s=%q: the sidecar exports traces with otlp (or none)", envExporter, getenv(envExporter))
	}
	if getenv(envTracesEndpoint) == "" && getenv(envEndpoint) == "" {
		return s, nil
	}
	for _, name := range []string{envTracesProtocol, envProtocol} {
		if v := value(name); v != "" && v != "grpc" {
			return s, fmt.Errorf("%s=%q: the sidecar exports traces over grpc", name, getenv(name))
		}
	}
	if v := value(envSampler); v != "" && !samplers[v] {
		return s, fmt.Errorf("%s=%q: not a sampler the SDK knows", envSampler, getenv(envSampler))
	}
	if v := value(envSamplerArg); v != "" && strings.HasSuffix(value(envSampler), "traceidratio") {
		if r, err := strconv.ParseFloat(v, 64); err != nil || r < 0 || r > 1 {
			return s, fmt.Errorf("%s=%q: want a ratio from 0 to 1", envSamplerArg, getenv(envSamplerArg))
		}
	}
	if v := value(envMaxQueueSize); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("%s=%q: want a positive number of spans", envMaxQueueSize, getenv(envMaxQueueSize))
		}
		s.maxQueue = n
	}
	s.on = true
	return s, nil
}
