package inject

import (
	"encoding/json"
	"os"
	"testing"

	evanjsonpatch "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testTemplate reads testdata/template.yaml: the chart's sidecar for its defaults.
func testTemplate(t *testing.T) Template {
	t.Helper()
	data, err := os.ReadFile("testdata/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ParseTemplate(data)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// appPod returns a pod with one app container serving gRPC on 50051,
// restricted as Pod Security "restricted" wants, with annotations.
func appPod(annotations map[string]string) *corev1.Pod {
	no, yes := false, true
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: annotations},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "example/app:1",
				Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 50051, Protocol: corev1.ProtocolTCP}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: &no,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// optIn is the annotation that opts a pod in.
var optIn = map[string]string{AnnotationInject: "true"}

// with returns optIn and the given annotation pairs.
func with(kv ...string) map[string]string {
	m := map[string]string{AnnotationInject: "true"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// apply returns pod with patch applied, through its JSON as the API server does.
func apply(t *testing.T, pod *corev1.Pod, patch []jsonpatch.Operation) *corev1.Pod {
	t.Helper()
	doc, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := json.Marshal(patch)
	if err != nil {
		t.Fatal(err)
	}
	p, err := evanjsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("decode patch %s: %v", ops, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("apply patch %s: %v", ops, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

// sidecar returns the container named collapser of pod, and whether it is an init container.
func sidecar(t *testing.T, pod *corev1.Pod) (corev1.Container, bool) {
	t.Helper()
	for _, c := range pod.Spec.InitContainers {
		if c.Name == "collapser" {
			return c, true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == "collapser" {
			return c, false
		}
	}
	t.Fatal("pod has no collapser container")
	return corev1.Container{}, false
}

// env returns the value of variable name in c.
func env(c corev1.Container, name string) string {
	if i := envIndex(c.Env, name); i >= 0 {
		return c.Env[i].Value
	}
	return "<unset>"
}

// port returns the number of c's port named name, 0 if none.
func port(c corev1.Container, name string) int32 {
	if i := portIndex(c.Ports, name); i >= 0 {
		return c.Ports[i].ContainerPort
	}
	return 0
}
