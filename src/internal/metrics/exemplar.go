package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// exemplarLabel is the label of an exemplar that names its trace, the one
// Grafana's exemplar links read by default.
const exemplarLabel = "trace_id"

// exemplar returns the exemplar of a call whose context is ctx: the trace ID
// of its span, when the span is sampled (a trace that is not exported would
// be a link to nothing); nil otherwise. Without Options.Exemplars (tracing
// is off) it does not even look.
func (s *Recorder) exemplar(ctx context.Context) prometheus.Labels {
	if !s.exemplars {
		return nil
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return prometheus.Labels{exemplarLabel: sc.TraceID().String()}
}

// add counts one in c, with ctx's exemplar if it has one and the Recorder
// looks for exemplars.
func (s *Recorder) add(ctx context.Context, c prometheus.Counter) {
	if e := s.exemplar(ctx); e != nil {
		c.(prometheus.ExemplarAdder).AddWithExemplar(1, e)
		return
	}
	c.Inc()
}

// observe records v in o, with ctx's exemplar if it has one and the
// Recorder looks for exemplars.
func (s *Recorder) observe(ctx context.Context, o prometheus.Observer, v float64) {
	if e := s.exemplar(ctx); e != nil {
		o.(prometheus.ExemplarObserver).ObserveWithExemplar(v, e)
		return
	}
	o.Observe(v)
}
