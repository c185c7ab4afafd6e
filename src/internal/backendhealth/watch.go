// Package backendhealth makes the sidecar's grpc.health.v1 status follow the
// backend: the sidecar is only worth routing to while its backend answers.
package backendhealth

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const (
	// defaultInterval is used when Watch is given a non-positive interval.
	defaultInterval = time.Second
	// maxProbeTimeout bounds one probe; shorter intervals use the interval.
	maxProbeTimeout = time.Second
)

// Watch probes the backend every interval (grpc.health.v1 Check with a timeout;
// Unimplemented still means reachable) and sets srv's overall ("") status SERVING /
// NOT_SERVING; returns when ctx ends (sets NOT_SERVING first). A reachable
// backend makes the sidecar SERVING only once ready, the sidecar's own
// readiness (nil: ready), returns nil.
//
// The first probe runs at once. A probe times out after min(interval, 1s);
// an interval <= 0 means 1s. Only changes of status are logged: Info for
// SERVING, Warn for NOT_SERVING. A nil logger discards.
func Watch(ctx context.Context, backend grpc.ClientConnInterface, srv *health.Server, interval time.Duration, ready func() error, logger *slog.Logger) {
	if interval <= 0 {
		interval = defaultInterval
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	client := healthpb.NewHealthClient(backend)
	timeout := min(interval, maxProbeTimeout)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()

	defer func() {
		srv.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
		logger.Info("sidecar stopping: health NOT_SERVING")
	}()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		current, reason := probe(ctx, client, timeout)
		if current == healthpb.HealthCheckResponse_SERVING && ready != nil {
			if err := ready(); err != nil {
				current, reason = healthpb.HealthCheckResponse_NOT_SERVING, err.Error()
			}
		}
		if current != last && ctx.Err() == nil {
			// Logged before it is served: whoever sees the new status can
			// find the line that says why.
			if current == healthpb.HealthCheckResponse_SERVING {
				logger.Info("backend reachable: sidecar health SERVING", "reason", reason)
			} else {
				logger.Warn("backend unreachable or unhealthy, or sidecar not ready: sidecar health NOT_SERVING", "reason", reason)
			}
			srv.SetServingStatus("", current)
			last = current
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probe asks the backend's health service once and maps the answer to the
// sidecar's status, with a short reason for the logs.
func probe(ctx context.Context, client healthpb.HealthClient, timeout time.Duration) (healthpb.HealthCheckResponse_ServingStatus, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return healthpb.HealthCheckResponse_SERVING, "no health service (reachable)"
	case err != nil:
		return healthpb.HealthCheckResponse_NOT_SERVING, err.Error()
	default:
		if resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return healthpb.HealthCheckResponse_SERVING, "SERVING"
		}
		return healthpb.HealthCheckResponse_NOT_SERVING, "backend reports " + resp.GetStatus().String()
	}
}
