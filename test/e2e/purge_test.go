package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

const (
	getGreeting = hellov1.Greeter_GetGreeting_FullMethodName
	// purgedTTL keeps GetGreeting's NOT_FOUND on every replica for longer
	// than the test runs: only a purge takes it back.
	purgedTTL = time.Hour
	// adminPort is the sidecar's admin service, on the pod's loopback: a
	// port-forward reaches it from there.
	adminPort = 50054
)

// checkPurgeReachesEveryPod reads a greeting nobody set through every pod,
// so that each keeps the owner's NOT_FOUND (negative caching, purgedTTL),
// purges GetGreeting through the first pod's admin port, and reads again
// through the two others: from the backends' own counts, the purge reached
// all three replicas when those reads make exactly one backend call (the
// owner's, for everyone), where without it they would make none.
func checkPurgeReachesEveryPod(t *testing.T, kubectl *k8s.KubectlOptions) {
	t.Helper()
	pods := proxyPods(t, kubectl)
	clients := greeters(t, kubectl, pods)
	const name = "purge-e2e"
	kept := keepGreeting(t, kubectl, name, clients)

	resp := purgeGreetings(t, kubectl, pods[0].Name)
	if resp.GetReplicas() != int32(len(pods)) {
		t.Errorf("the purge reached %d replicas, want %d", resp.GetReplicas(), len(pods))
	}
	readNotFound(t, name, clients[1:]...)
	if got := greetingCalls(t, kubectl) - kept; got != 1 {
		t.Errorf("reads through the two other pods after the purge made %v backend calls, want 1: no replica may serve what was purged", got)
	}
}

// greeters returns a Greeter client of each pod's sidecar, through a
// port-forward to the pod, until the test ends.
func greeters(t *testing.T, kubectl *k8s.KubectlOptions, pods []corev1.Pod) []hellov1.GreeterClient {
	t.Helper()
	clients := make([]hellov1.GreeterClient, len(pods))
	for i, p := range pods {
		tunnel := k8s.NewTunnel(kubectl, k8s.ResourceTypePod, p.Name, 0, 50052)
		tunnel.ForwardPort(t)
		t.Cleanup(tunnel.Close)
		// One authority for every pod, as callers through the Service
		// have: it is part of the key.
		clients[i] = hellov1.NewGreeterClient(grpcClient(t, tunnel.Endpoint(), grpc.WithAuthority(release)))
	}
	return clients
}

// greetingCalls returns the GetGreeting calls the backends of the release's
// pods, ready or not, counted themselves.
func greetingCalls(t *testing.T, kubectl *k8s.KubectlOptions) float64 {
	t.Helper()
	var n float64
	for _, families := range podMetrics(t, kubectl, proxyPodSelector, 2113) {
		n += sampleSum(families["hello_requests_total"], map[string]string{"method": getGreeting})
	}
	return n
}

// readNotFound reads the greeting of name, which nobody set, through each
// client.
func readNotFound(t *testing.T, name string, clients ...hellov1.GreeterClient) {
	t.Helper()
	for i, c := range clients {
		_, err := c.GetGreeting(t.Context(), &hellov1.GetGreetingRequest{Name: name})
		if status.Code(err) != codes.NotFound {
			t.Fatalf("GetGreeting through client %d: %v, want NOT_FOUND", i, err)
		}
	}
}

// keepGreeting reads the greeting of name twice through every client and
// checks, from the backends' own counts, that the reads made one backend
// call: every pod keeps the owner's NOT_FOUND. It returns the count after.
func keepGreeting(t *testing.T, kubectl *k8s.KubectlOptions, name string, clients []hellov1.GreeterClient) float64 {
	t.Helper()
	start := greetingCalls(t, kubectl)
	readNotFound(t, name, clients...)
	readNotFound(t, name, clients...)
	kept := greetingCalls(t, kubectl)
	if kept-start != 1 {
		t.Fatalf("two reads through each of %d pods made %v backend calls, want 1 (the owner's, kept everywhere)", len(clients), kept-start)
	}
	return kept
}

// purgeGreetings purges every GetGreeting answer through the admin port of
// pod and returns what the purge says it reached.
func purgeGreetings(t *testing.T, kubectl *k8s.KubectlOptions, pod string) *adminv1.PurgeResponse {
	t.Helper()
	admin := k8s.NewTunnel(kubectl, k8s.ResourceTypePod, pod, 0, adminPort)
	admin.ForwardPort(t)
	t.Cleanup(admin.Close)
	resp, err := adminv1.NewCacheClient(grpcClient(t, admin.Endpoint())).Purge(t.Context(),
		&adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: getGreeting}})
	if err != nil {
		t.Fatalf("Purge through pod %s: %v", pod, err)
	}
	t.Logf("the purge through pod %s reached %d replicas (missed %v) and took back %d answers", pod, resp.GetReplicas(), resp.GetMissed(), resp.GetEntries())
	return resp
}

// grpcClient connects to addr in plain text until the test ends.
func grpcClient(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(fmt.Errorf("connect to %s: %w", addr, err))
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}
