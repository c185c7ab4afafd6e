package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// readinessGate is the condition type the replicas test's pods carry as a
// readiness gate (the chart's podReadinessGates): a pod is ready only while
// the test says so, as a load balancer's controller says so of its
// targets, so that the test can take a running pod out of the Services.
const readinessGate = "e2e.collapser.io/ready"

// gateKeeper plays the controller of readinessGate for the pods of a
// selector: it sets the condition True on every pod as it appears, but on
// the pods the test holds, where it is False.
type gateKeeper struct {
	list func(ctx context.Context) ([]corev1.Pod, error)
	set  func(ctx context.Context, pod string, status corev1.ConditionStatus) error

	mu   sync.Mutex      // held while a condition is set, so that hold and release win
	held map[string]bool // guarded by mu
}

// startGateKeeper starts the gate keeper of the pods of selector in
// kubectl's namespace, until the test ends.
func startGateKeeper(t *testing.T, kubectl *k8s.KubectlOptions, selector metav1.ListOptions) *gateKeeper {
	t.Helper()
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		t.Fatal(err)
	}
	pods := clientset.CoreV1().Pods(kubectl.Namespace)
	g := &gateKeeper{
		list: func(ctx context.Context) ([]corev1.Pod, error) {
			list, err := pods.List(ctx, selector)
			if err != nil {
				return nil, err
			}
			return list.Items, nil
		},
		set: func(ctx context.Context, pod string, status corev1.ConditionStatus) error {
			// A strategic merge patch of the status: conditions merge by type.
			patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []map[string]any{{
				"type": readinessGate, "status": status, "lastTransitionTime": metav1.Now(),
			}}}})
			if err != nil {
				return err
			}
			_, err = pods.Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		},
		held: map[string]bool{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A controller's resync: new pods get the condition within a tick.
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			g.sync(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return g
}

// sync sets the condition of every pod that does not have the one it
// should; a failure is tried again at the next sync.
func (g *gateKeeper) sync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pods, err := g.list(ctx)
	if err != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range pods {
		want := g.status(p.Name)
		if p.DeletionTimestamp == nil && gateStatus(&p) != want {
			_ = g.set(ctx, p.Name, want)
		}
	}
}

// status is the condition pod should have. The caller holds g.mu.
func (g *gateKeeper) status(pod string) corev1.ConditionStatus {
	if g.held[pod] {
		return corev1.ConditionFalse
	}
	return corev1.ConditionTrue
}

// hold sets pod's condition False, and keeps it so: the pod goes unready
// while it keeps running.
func (g *gateKeeper) hold(t *testing.T, pod string) {
	t.Helper()
	g.setHeld(t, pod, true)
}

// release sets pod's condition True again.
func (g *gateKeeper) release(t *testing.T, pod string) {
	t.Helper()
	g.setHeld(t, pod, false)
}

func (g *gateKeeper) setHeld(t *testing.T, pod string, held bool) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held[pod] = held
	status := g.status(pod)
	retry.DoWithRetry(t, fmt.Sprintf("set %s %s on pod %s", readinessGate, status, pod), 10, time.Second, func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return "", g.set(ctx, pod, status)
	})
}

// gateStatus returns the pod's readinessGate condition, "" when it has none.
func gateStatus(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == readinessGate {
			return c.Status
		}
	}
	return ""
}

// endpointsOf returns, by pod name, whether each endpoint of the Service's
// EndpointSlices is ready: the pods a headless Service's DNS name resolves
// to are those that are.
func endpointsOf(t *testing.T, kubectl *k8s.KubectlOptions, service string) (map[string]bool, error) {
	t.Helper()
	clientset, err := k8s.GetKubernetesClientFromOptionsE(t, kubectl)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := clientset.DiscoveryV1().EndpointSlices(kubectl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return nil, err
	}
	ready := map[string]bool{}
	for _, sl := range list.Items {
		for _, ep := range sl.Endpoints {
			if ep.TargetRef != nil {
				ready[ep.TargetRef.Name] = ep.Conditions.Ready != nil && *ep.Conditions.Ready
			}
		}
	}
	return ready, nil
}
