package otlptest

import (
	"encoding/hex"
	"fmt"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// Span is a received span, flattened for assertions: IDs in hex, attribute
// values as text.
type Span struct {
	TraceID, SpanID, ParentSpanID string // ParentSpanID "" for a root
	Name                          string
	Kind                          tracepb.Span_SpanKind
	Attributes                    map[string]string
	Links                         []Link
	// Service is the service.name of the resource that sent it.
	Service string
}

// Link is a span link: the span linked to.
type Link struct {
	TraceID, SpanID string
}

// Spans are received spans, in the order they came.
type Spans []Span

// Where returns the spans for which keep is true.
func (s Spans) Where(keep func(Span) bool) Spans {
	var out Spans
	for _, sp := range s {
		if keep(sp) {
			out = append(out, sp)
		}
	}
	return out
}

// WithAttribute returns the spans whose attribute key has value.
func (s Spans) WithAttribute(key, value string) Spans {
	return s.Where(func(sp Span) bool {
		v, ok := sp.Attributes[key]
		return ok && v == value
	})
}

// Named returns the spans called name.
func (s Spans) Named(name string) Spans {
	return s.Where(func(sp Span) bool { return sp.Name == name })
}

// ChildrenOf returns the spans whose parent is p.
func (s Spans) ChildrenOf(p Span) Spans {
	return s.Where(func(sp Span) bool { return sp.TraceID == p.TraceID && sp.ParentSpanID == p.SpanID })
}

// ByID returns the span of trace traceID with spanID, if received.
func (s Spans) ByID(traceID, spanID string) (Span, bool) {
	for _, sp := range s {
		if sp.TraceID == traceID && sp.SpanID == spanID {
			return sp, true
		}
	}
	return Span{}, false
}

// LinksTo reports whether sp has a link to target.
func (sp Span) LinksTo(target Span) bool {
	for _, l := range sp.Links {
		if l.TraceID == target.TraceID && l.SpanID == target.SpanID {
			return true
		}
	}
	return false
}

// flatten returns the spans of req.
func flatten(req *coltracepb.ExportTraceServiceRequest) Spans {
	var out Spans
	for _, rs := range req.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					TraceID:      hex.EncodeToString(sp.GetTraceId()),
					SpanID:       hex.EncodeToString(sp.GetSpanId()),
					ParentSpanID: hex.EncodeToString(sp.GetParentSpanId()),
					Name:         sp.GetName(),
					Kind:         sp.GetKind(),
					Attributes:   attributes(sp.GetAttributes()),
					Service:      service,
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, Link{TraceID: hex.EncodeToString(l.GetTraceId()), SpanID: hex.EncodeToString(l.GetSpanId())})
				}
				out = append(out, s)
			}
		}
	}
	return out
}

// attributes returns kvs with their values as text.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = text(kv.GetValue())
	}
	return m
}

// text is an attribute value as text.
func text(v *commonpb.AnyValue) string {
	switch v := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return v.StringValue
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(v.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(v.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(v.DoubleValue)
	}
	return v.String()
}
