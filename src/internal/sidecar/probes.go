package sidecar

import (
	"net/http"

	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Paths of the probes the metrics listener answers, for kubelets that
// cannot ask the gRPC health service: its listener serves TLS
// (--tls-cert-file), and the kubelet's gRPC probe speaks plain text only.
const (
	LivezPath  = "/livez"  // LivenessService's status
	ReadyzPath = "/readyz" // the sidecar's status (service "")
)

// probe answers 200 while hs reports service SERVING, 503 otherwise, with
// the status as its body.
func probe(hs *health.Server, service string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := hs.Check(r.Context(), &healthpb.HealthCheckRequest{Service: service})
		status := "UNKNOWN"
		if err == nil {
			status = resp.GetStatus().String()
		}
		if status != healthpb.HealthCheckResponse_SERVING.String() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(status + "\n"))
	})
}
