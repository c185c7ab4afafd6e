package e2e

import (
	"crypto/rand"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The workloads of the injector's subtests: the hello backend's image in
// manifests of their own, as a team that never used the chart writes them,
// each opted in to the sidecar by its pod template's annotation.
const (
	// helloApp is a Deployment of one pod and its Service.
	helloApp = "hello"
	// peersApp is a Deployment of three pods that collapse as one, its
	// Service, and the headless Service peersService that its peers
	// annotation names.
	peersApp     = "hello-peers"
	peersService = peersApp + "-pods"
	// peersToken is the Secret of the peers' token (key token), which
	// every call between them carries.
	peersToken = peersApp + "-peer-token"
	// peersTLS is the Secret of the peers' certificate, key and CA
	// (tls.crt, tls.key, ca.crt) that the injector issues them
	// (inject.PeerSecretName): they call each other over mutual TLS.
	peersTLS = "collapser-peer-tls-" + peersService
	// probeApp labels the pods that only show what admission did to them:
	// no Service selects them.
	probeApp = "admission-probe"
)

// The injector's annotations and the injected sidecar's names (package
// inject: the test module cannot import it).
const (
	annotationInject          = "collapser.io/inject"
	annotationPeers           = "collapser.io/peers"
	annotationPeerTokenSecret = "collapser.io/peer-token-secret"
	sidecarName               = "collapser"      // the chart's sidecar container's name
	sidecarPort               = "collapser"      // the injected gRPC port a Service targets
	sidecarPeerPort           = "collapser-peer" // the injected peer port
)

// appSelector lists the pods of app.
func appSelector(app string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: "app=" + app}
}

// helloContainer is the hello backend as its own manifest runs it: gRPC on
// loopback, where only a sidecar in its pod reaches it, its metrics and
// /healthz on every address, as slow as the chart's backend in this test.
func helloContainer(s settings) corev1.Container {
	return corev1.Container{
		Name:            "hello",
		Image:           imageRepoPrefix + "/hello-backend:" + s.imageTag,
		ImagePullPolicy: corev1.PullNever,
		Env: []corev1.EnvVar{
			{Name: "HELLO_LISTEN", Value: "127.0.0.1:50051"},
			{Name: "HELLO_METRICS_LISTEN", Value: ":2113"},
			{Name: "HELLO_LATENCY", Value: backendLatency.String()},
		},
		Ports: []corev1.ContainerPort{{Name: "backend-metrics", ContainerPort: 2113, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("backend-metrics")}},
			PeriodSeconds: 2,
		},
		SecurityContext: restrictedSecurity(),
	}
}

// injectedPodTemplate is a pod of app running spec, opted in to the
// sidecar, with the further annotations.
func injectedPodTemplate(app string, spec corev1.PodSpec, annotations map[string]string) corev1.PodTemplateSpec {
	all := map[string]string{annotationInject: "true"}
	for k, v := range annotations {
		all[k] = v
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}, Annotations: all},
		Spec:       spec,
	}
}

// helloPodSpec runs the hello backend alone, restricted.
func helloPodSpec(s settings) corev1.PodSpec {
	return corev1.PodSpec{
		AutomountServiceAccountToken: ptr(false),
		SecurityContext:              restrictedPodSecurity(),
		Containers:                   []corev1.Container{helloContainer(s)},
	}
}

// injectedHelloPod is a pod of app named name: the hello backend, opted in.
func injectedHelloPod(s settings, name, app string) *corev1.Pod {
	tmpl := injectedPodTemplate(app, helloPodSpec(s), nil)
	tmpl.ObjectMeta.Name = name
	return &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
}

// helloDeployment runs replicas pods of app, the hello backend opted in to
// the sidecar with the further annotations.
func helloDeployment(s settings, app string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: injectedPodTemplate(app, helloPodSpec(s), annotations),
		},
	}
}

// peerTokenSecret is the Secret name, of a peers' token (key token): 52
// random characters.
func peerTokenSecret(name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		StringData: map[string]string{"token": rand.Text() + rand.Text()},
	}
}

// helloService is the Service in front of app's pods: its gRPC port
// targets the injected sidecar's port by name, as the README tells users
// to; backend-metrics reaches the backends' own counts.
func helloService(app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{
				{Name: "grpc", Port: 50052, TargetPort: intstr.FromString(sidecarPort), Protocol: corev1.ProtocolTCP, AppProtocol: ptr("grpc")},
				{Name: "backend-metrics", Port: 2113, TargetPort: intstr.FromString("backend-metrics"), Protocol: corev1.ProtocolTCP},
			},
		},
	}
}

// headlessPeersService is the headless Service named name that selects
// app's pods and exposes the injected peer port: the peers annotation
// names it, and its name resolves to every ready pod.
func headlessPeersService(name, app string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{"app": app},
			Ports: []corev1.ServicePort{
				{Name: "peer", Port: 50053, TargetPort: intstr.FromString(sidecarPeerPort), Protocol: corev1.ProtocolTCP, AppProtocol: ptr("grpc")},
			},
		},
	}
}

// clientJob is a Job named name that runs the demo client once with args,
// opted in to the sidecar: it is done when the client exits.
func clientJob(s settings, name string, args ...string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr(int32(0)),
			Template:     injectedPodTemplate(name, clientPodSpec(s, args), nil),
		},
	}
}
