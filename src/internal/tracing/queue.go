package tracing

import (
	"context"
	"log/slog"
	"sync/atomic"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// queue hands ended spans to the SDK's batch processor while fewer than
// max are waiting for export, and drops and counts the others: a span
// never waits for room, so a slow or absent collector never slows a call.
//
// The batch processor drops spans on its own when its queue is full, and
// counts them where nobody can read the count. Its queue holds max spans,
// and queue counts every span it handed over until the export of its batch
// returned (exporter), so the processor's queue is never full: every span
// dropped is dropped, and counted, here.
type queue struct {
	sdktrace.SpanProcessor // the SDK's batch processor; a queue of max spans

	max     int64
	waiting atomic.Int64  // spans handed over, their export not yet returned
	dropped atomic.Uint64 // spans dropped because max were waiting
}

// OnEnd hands s to the batch processor if it is to be exported and there
// is room.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor would not export it either
	}
	if q.waiting.Add(1) > q.max {
		q.waiting.Add(-1)
		q.dropped.Add(1)
		return
	}
	q.SpanProcessor.OnEnd(s)
}

// exporter is the OTLP exporter as the batch processor sees it: it tells
// the queue when spans are no longer waiting, and counts and logs failed
// exports itself, once when exports start failing and once when they work
// again. The SDK's global error handler, which would log every failure
// with the standard logger, is not told.
type exporter struct {
	sdktrace.SpanExporter

	queue   *queue
	failed  atomic.Uint64 // spans of batches whose export failed
	failing atomic.Bool   // the last export failed
	logger  *slog.Logger
}

// ExportSpans exports spans and reports no error: a failure is counted.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.queue.waiting.Add(-int64(len(spans)))
	if err != nil {
		e.failed.Add(uint64(len(spans)))
		if !e.failing.Swap(true) {
			e.logger.Warn("traces: export failed; spans are dropped (collapser_trace_spans_dropped_total) until an export succeeds", "spans", len(spans), "error", err)
		}
		return nil
	}
	if e.failing.Swap(false) {
		e.logger.Info("traces: export works again")
	}
	return nil
}
