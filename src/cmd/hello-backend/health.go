package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// healthPath is the HTTP path, on the metrics listener, of the backend's
// health. Kubelet probes a pod on its IP, so when the gRPC listener is bound
// to loopback (the chart does this: only the sidecar in the same pod may call
// the Greeter) a gRPC probe cannot reach it; an HTTP probe of this path on the
// metrics port can, and opens nothing but the health status to the network.
const healthPath = "/healthz"

// healthCheckTimeout bounds the gRPC health check behind one GET of healthPath.
const healthCheckTimeout = 2 * time.Second

// dialHealth returns a client of the grpc.health.v1 service on the backend's
// own gRPC listener, dialled on loopback when it listens on every address.
func dialHealth(grpcAddr net.Addr) (*grpc.ClientConn, healthpb.HealthClient, error) {
	addr := grpcAddr.String()
	if tcp, ok := grpcAddr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// No service config is looked up: a DNS TXT query for it can wait seconds
		// for an answer that never comes where names outside the cluster do not resolve.
		grpc.WithDisableServiceConfig())
	if err != nil {
		return nil, nil, fmt.Errorf("dial own gRPC listener %s for %s: %w", addr, healthPath, err)
	}
	return conn, healthpb.NewHealthClient(conn), nil
}

// healthHandler answers with the overall grpc.health.v1 status that client
// reports, checked through the gRPC listener itself (so a listener that stops
// serving fails the probe too): 200 and "SERVING", or 503 and the status or
// error.
func healthHandler(client healthpb.HealthClient) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), healthCheckTimeout)
		defer cancel()
		resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		switch {
		case err != nil:
			http.Error(w, "gRPC health check: "+err.Error(), http.StatusServiceUnavailable)
		case resp.GetStatus() != healthpb.HealthCheckResponse_SERVING:
			http.Error(w, resp.GetStatus().String(), http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, resp.GetStatus())
		}
	})
}
