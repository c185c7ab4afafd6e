package e2e

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/helm"
	"github.com/gruntwork-io/terratest/modules/random"
	"github.com/gruntwork-io/terratest/modules/retry"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/collapser/collapser/src/demo"
	"github.com/collapser/collapser/src/otlptest"
)

// tracedBurst is the burst of TestTracesOnKind: identical calls, all sent
// while the backend's first call runs (backendLatency).
const tracedBurst = 1000

// TestTracesOnKind installs the chart with tracing.endpoint pointing at an
// OTLP receiver this test runs, sends one burst of identical calls through
// the sidecar and checks the trace of every call: as many leaders as the
// backend's own count of calls, each leader's collapser.call span with its
// backend call as its child, and every other caller linked to one of those
// calls.
//
// The sidecar's pod must reach the test process: the receiver listens on
// the gateway of the kind cluster's docker network (docker network inspect
// kind), which a pod reaches through its node, or on E2E_OTLP_LISTEN
// (host:port) when set. make e2e runs it after TestCollapserOnKind, on the
// same cluster.
func TestTracesOnKind(t *testing.T) {
	s := loadSettings(t)
	ensureCluster(t, s)
	loadImages(t, s)
	r := otlptest.StartOn(t, receiverAddr(t))
	t.Logf("OTLP receiver on %s", r.Addr())

	kubectl := restrictedNamespace(t, s, "collapser-traces-"+strings.ToLower(random.UniqueId()))
	opts := helmOptions(s, kubectl, cacheTTL)
	opts.SetValues["tracing.endpoint"] = "http://" + r.Addr()
	opts.SetValues["tracing.maxQueueSize"] = fmt.Sprint(4 * tracedBurst) // the burst's spans wait for one export
	// The injector's webhook configuration is cluster-wide: TestCollapserOnKind's.
	opts.SetValues["injector.enabled"] = "false"
	helm.Install(t, opts, s.chartDir, release)
	waitForProxyPod(t, kubectl, "")

	target, backend := openTunnels(t, kubectl)
	report := runDemo(t, demo.Config{Target: target, BackendMetrics: backend, Requests: tracedBurst, Concurrency: tracedBurst, Name: "traced", Timeout: time.Minute})
	if report.Errors != 0 || report.BackendCalls < 1 {
		t.Fatalf("burst: %d errors (%v), %d backend calls", report.Errors, report.ErrorsByCode, report.BackendCalls)
	}

	outcome := otlptest.OutcomeAttribute
	served := func(s otlptest.Span) bool {
		return s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Attributes[outcome] != ""
	}
	var spans otlptest.Spans
	retry.DoWithRetry(t, "every caller's span at the receiver", 60, 2*time.Second, func() (string, error) {
		spans = r.Spans()
		if n := len(spans.Where(served)); n < tracedBurst {
			return "", fmt.Errorf("%d of %d callers' spans", n, tracedBurst)
		}
		return "", nil
	})

	leaders := spans.WithAttribute(outcome, "leader")
	if int64(len(leaders)) != report.BackendCalls {
		t.Errorf("%d leader spans, want one per backend call the backend counted (%d)", len(leaders), report.BackendCalls)
	}
	calls := map[string]bool{} // the collapser.call spans of the leaders, by span ID
	for _, l := range leaders {
		if l.Service != "collapser" {
			t.Errorf("leader span of service %q, want collapser", l.Service)
		}
		children := spans.ChildrenOf(l).Named(otlptest.CallSpanName)
		if len(children) != 1 {
			t.Fatalf("leader %s has %d call spans, want 1", l.SpanID, len(children))
		}
		call := children[0]
		backendCalls := spans.ChildrenOf(call).Where(func(s otlptest.Span) bool { return s.Kind == tracepb.Span_SPAN_KIND_CLIENT })
		if len(backendCalls) != 1 {
			t.Errorf("call %s has %d backend call spans, want 1", call.SpanID, len(backendCalls))
		}
		calls[call.TraceID+"/"+call.SpanID] = true
	}
	answered := spans.Where(served).Where(func(s otlptest.Span) bool { return s.Attributes[outcome] != "leader" })
	for _, a := range answered {
		if len(a.Links) != 1 || !calls[a.Links[0].TraceID+"/"+a.Links[0].SpanID] {
			t.Fatalf("%s span %s links to %v, want one of the leaders' calls", a.Attributes[outcome], a.SpanID, a.Links)
		}
	}
	t.Logf("%d callers: %d leaders, %d linked to their calls", len(spans.Where(served)), len(leaders), len(answered))
}

// receiverAddr returns where the OTLP receiver listens: E2E_OTLP_LISTEN, or
// a free port on the gateway of the kind docker network, the host as the
// cluster's pods reach it.
func receiverAddr(t *testing.T) string {
	t.Helper()
	if addr := os.Getenv("E2E_OTLP_LISTEN"); addr != "" {
		return addr
	}
	out := command(t, "", nil, "docker", "network", "inspect", "kind", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}")
	for _, gw := range strings.Fields(out) {
		if ip := net.ParseIP(gw); ip != nil && ip.To4() != nil {
			return net.JoinHostPort(gw, "0")
		}
	}
	t.Fatalf("no IPv4 gateway in the kind network: %q; set E2E_OTLP_LISTEN", out)
	return ""
}
