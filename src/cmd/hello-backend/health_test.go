package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// fakeHealth answers Check with a fixed status or error.
type fakeHealth struct {
	healthpb.HealthClient
	status healthpb.HealthCheckResponse_ServingStatus
	err    error
}

func (f fakeHealth) Check(context.Context, *healthpb.HealthCheckRequest, ...grpc.CallOption) (*healthpb.HealthCheckResponse, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &healthpb.HealthCheckResponse{Status: f.status}, nil
}

func TestHealthHandler_OKOnlyWhenTheGRPCHealthServiceIsServing(t *testing.T) {
	tests := []struct {
		name     string
		client   fakeHealth
		wantCode int
		wantBody string
	}{
		{"serving", fakeHealth{status: healthpb.HealthCheckResponse_SERVING}, http.StatusOK, "SERVING"},
		{"not serving", fakeHealth{status: healthpb.HealthCheckResponse_NOT_SERVING}, http.StatusServiceUnavailable, "NOT_SERVING"},
		{"unreachable", fakeHealth{err: errors.New("connection refused")}, http.StatusServiceUnavailable, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthHandler(tt.client).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, healthPath, nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("GET %s = %d %q, want %d with %q", healthPath, rec.Code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}
