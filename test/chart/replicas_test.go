package chart

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
)

func TestRender_PeersFollowTheNumberOfPods(t *testing.T) {
	const target = "dns:///" + fullname + "-pods." + namespace + ".svc.cluster.local:50053"
	tests := []struct {
		name  string
		set   []string
		peers bool
		hpa   bool
	}{
		{"one pod: no peers", nil, false, false},
		{"three pods: peers", []string{"replicaCount=3"}, true, false},
		{"three pods, peers off", []string{"replicaCount=3", "peers.enabled=false"}, false, false},
		{"one pod, peers on", []string{"peers.enabled=true"}, true, false},
		{"autoscaling: peers, and no fixed replica count", []string{"autoscaling.enabled=true"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, "", tt.set...)
			spec := r.deployments[fullname].Spec.Template.Spec
			// Both variables are literal values (no valueFrom), which envMap holds.
			env := envMap(container(t, spec, "collapser"))
			got, ok := env["COLLAPSER_PEERS"]
			if ok != tt.peers || tt.peers && got != target {
				t.Errorf("COLLAPSER_PEERS = %q (set %v), want %v with %s", got, ok, tt.peers, target)
			}
			if listen := env["COLLAPSER_PEER_LISTEN"]; tt.peers && listen != ":50053" {
				t.Errorf("COLLAPSER_PEER_LISTEN = %q, want :50053", listen)
			}
			checkPeerToken(t, r, spec, tt.peers)
			checkReplicasService(t, r, tt.peers, "cluster.local", 50053)
			if containerPorts := containerPortNames(spec); containerPorts["peer"] != tt.peers {
				t.Errorf("container ports %v, want a peer port: %v", slices.Sorted(maps.Keys(containerPorts)), tt.peers)
			}
			pods := r.services[fullname+"-pods"]
			if pods == nil || pods.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Fatalf("no headless Service %s-pods: %+v", fullname, pods)
			}
			selects(t, pods, r.deployments[fullname].Spec.Template.Labels)
			svcPorts := servicePorts(pods)
			if _, ok := svcPorts["peer"]; ok != tt.peers {
				t.Errorf("headless Service ports %v, want a peer port: %v", slices.Sorted(maps.Keys(svcPorts)), tt.peers)
			}
			if hpa := r.hpas[fullname]; (hpa != nil) != tt.hpa {
				t.Errorf("HorizontalPodAutoscaler rendered %v, want %v", hpa != nil, tt.hpa)
			}
			if replicas := r.deployments[fullname].Spec.Replicas; (replicas == nil) != tt.hpa {
				t.Errorf("Deployment replicas %v, want none with autoscaling", replicas)
			}
		})
	}
}

// checkPeerToken checks that, with peers, the release's peer token is a
// Secret of a random token mounted read-only into the sidecar, which reads
// it from COLLAPSER_PEER_TOKEN_FILE; and that without peers there is none.
func checkPeerToken(t *testing.T, r *rendered, spec corev1.PodSpec, peers bool) {
	t.Helper()
	const name = fullname + "-peer-token"
	secret := r.secrets[name]
	if (secret != nil) != peers {
		t.Fatalf("Secret %s rendered %v, want %v", name, secret != nil, peers)
	}
	c := container(t, spec, "collapser")
	file, ok := envMap(c)["COLLAPSER_PEER_TOKEN_FILE"]
	if ok != peers {
		t.Errorf("COLLAPSER_PEER_TOKEN_FILE set %v, want %v", ok, peers)
	}
	if !peers {
		return
	}
	if token := secret.Data["token"]; len(token) < 32 {
		t.Errorf("peer token %q: want a random token of at least 32 characters", token)
	}
	var mount *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if m.Name == "peer-token" {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil || !mount.ReadOnly || file != mount.MountPath+"/token" {
		t.Errorf("sidecar mounts %+v and reads %s, want the token read-only at the file it reads", mount, file)
	}
	for _, v := range spec.Volumes {
		if v.Name == "peer-token" && (v.Secret == nil || v.Secret.SecretName != name) {
			t.Errorf("volume peer-token = %+v, want the Secret %s", v, name)
		}
	}
}

// checkReplicasService checks that, with peers, a headless Service that
// publishes the addresses of pods that are not ready selects the release's
// collapser pods on their peer port, and that the sidecar takes purges to
// the pods it lists (COLLAPSER_REPLICAS) while its owners stay the ready
// pods of <fullname>-pods; and that without peers there is neither.
func checkReplicasService(t *testing.T, r *rendered, peers bool, clusterDomain string, port int32) {
	t.Helper()
	const name = fullname + "-replicas"
	spec := r.deployments[fullname].Spec.Template.Spec
	target, set := envMap(container(t, spec, "collapser"))["COLLAPSER_REPLICAS"]
	svc := r.services[name]
	if !peers {
		if svc != nil || set {
			t.Errorf("without peers: Service %s rendered %v, COLLAPSER_REPLICAS = %q (set %v); want neither", name, svc != nil, target, set)
		}
		return
	}
	if svc == nil {
		t.Fatalf("no Service %s; rendered %v", name, r.kinds())
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s: clusterIP %q, publishNotReadyAddresses %v; want a headless Service that lists pods that are not ready",
			name, svc.Spec.ClusterIP, svc.Spec.PublishNotReadyAddresses)
	}
	selects(t, svc, r.deployments[fullname].Spec.Template.Labels)
	if !maps.Equal(svc.Spec.Selector, proxyLabels) {
		t.Errorf("Service %s selects %v, want the release's collapser pods %v", name, svc.Spec.Selector, proxyLabels)
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("Service %s ports %+v, want the peer port alone", name, svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Name != "peer" || p.Port != port || p.TargetPort.String() != "peer" || p.Protocol != corev1.ProtocolTCP {
		t.Errorf("Service %s port %+v, want peer %d to the container port named peer", name, p, port)
	}
	if !containerPortNames(spec)["peer"] {
		t.Errorf("no container declares the port named peer that Service %s targets", name)
	}
	want := fmt.Sprintf("dns:///%s.%s.svc.%s:%d", name, namespace, clusterDomain, port)
	if target != want {
		t.Errorf("COLLAPSER_REPLICAS = %q (set %v), want %s", target, set, want)
	}
	if peersTarget := envMap(container(t, spec, "collapser"))["COLLAPSER_PEERS"]; !strings.Contains(peersTarget, "/"+fullname+"-pods.") {
		t.Errorf("COLLAPSER_PEERS = %q, want the Service of ready pods %s-pods: a pod that is not ready owns no key", peersTarget, fullname)
	}
}

func TestRender_ReplicasServiceFollowsPeersPortAndDomain(t *testing.T) {
	r := render(t, allFeatures, "peers.port=6000", "clusterDomain=example.org")
	checkReplicasService(t, r, true, "example.org", 6000)
	r = render(t, allFeatures, "peers.enabled=false")
	checkReplicasService(t, r, false, "", 0)
}

func TestRender_TestPodReadsEveryPodsBackendCount(t *testing.T) {
	r := render(t, "", "replicaCount=3")
	pod := r.pods[fullname+"-test-collapse"]
	if pod == nil {
		t.Fatal("no test pod")
	}
	want := "--backend-metrics=http://" + fullname + "-pods:2113/metrics"
	if !slices.Contains(pod.Spec.Containers[0].Args, want) {
		t.Errorf("test pod args %v, want %s (the headless Service names every pod)", pod.Spec.Containers[0].Args, want)
	}
}

func TestRender_ContainersSleepBeforeStoppingWhereKubernetesCan(t *testing.T) {
	r := render(t, "")
	want := map[string]int64{"collapser": 5, "hello-backend": 10} // the backend outlives the sidecar
	for _, c := range r.deployments[fullname].Spec.Template.Spec.Containers {
		var got int64
		if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
			got = c.Lifecycle.PreStop.Sleep.Seconds
		}
		if got != want[c.Name] {
			t.Errorf("%s preStop sleep %ds, want %ds", c.Name, got, want[c.Name])
		}
	}

	// Kubernetes 1.29 has no sleep action: nothing is rendered.
	caps := capabilities()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.29.0", Major: "1", Minor: "29"}
	files, err := renderWith(loadChart(t), userValues(t, ""), caps)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(files["collapser/templates/deployment.yaml"], "lifecycle:") {
		t.Error("a preStop sleep rendered for Kubernetes 1.29, which rejects it")
	}
}

func TestRender_PeersTakeAnExistingTokenSecret(t *testing.T) {
	r := render(t, "", "replicaCount=3", "peers.existingSecret=app-peer-token")
	if secret := r.secrets[fullname+"-peer-token"]; secret != nil {
		t.Errorf("the chart made its own token Secret beside peers.existingSecret")
	}
	spec := r.deployments[fullname].Spec.Template.Spec
	found := false
	for _, v := range spec.Volumes {
		if v.Name == "peer-token" {
			found = v.Secret != nil && v.Secret.SecretName == "app-peer-token"
		}
	}
	if !found {
		t.Errorf("volumes %+v, want peer-token from the Secret app-peer-token", spec.Volumes)
	}
}
