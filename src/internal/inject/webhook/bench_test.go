package webhook

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/collapser/collapser/src/internal/inject"
)

// BenchmarkWebhook_Admission measures one pod admission through the
// webhook's http.Handler, as the server runs it after TLS: the
// AdmissionReview decoded, the pod decoded, the injector's patch built (or
// not) and the response encoded and written. Each case checks after its
// loop that every admission took its path, by the handler's own count.
//
//   - injected: a pod with collapser.io/inject "true" gets the sidecar;
//   - skipped: a pod with collapser.io/inject "false", decided by its
//     annotation (no namespace read);
//   - skipped_namespace_read: a pod without the annotation in a namespace
//     without the label; its namespace is read from an in-memory fake, so
//     the API server's round trip, which the injector makes for such a pod,
//     is not in the number.
func BenchmarkWebhook_Admission(b *testing.B) {
	cases := []struct {
		name        string
		annotations map[string]string
		result      string
	}{
		{"injected", map[string]string{inject.AnnotationInject: "true"}, ResultInjected},
		{"skipped", map[string]string{inject.AnnotationInject: "false"}, ResultSkipped},
		{"skipped_namespace_read", nil, ResultSkipped},
	}
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			h, metrics := newWebhook(b, nil, nil)
			body := reviewJSON(b, "plain", podKind, admissionv1.Create, podJSON(b, bc.annotations))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/inject", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			if got := testutil.ToFloat64(metrics.admissions.WithLabelValues(bc.result)); got != float64(b.N) {
				b.Fatalf("%v of %d admissions counted %s", got, b.N, bc.result)
			}
		})
	}
}
