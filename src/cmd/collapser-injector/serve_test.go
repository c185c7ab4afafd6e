package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/collapser/collapser/src/internal/inject"
	"github.com/collapser/collapser/src/internal/testkit"
)

// TestServe_InjectsOverTLSOnceReady runs the injector against a fake API
// server: it becomes ready once it serves a certificate its webhook
// configuration trusts, injects a pod over that TLS, counts it, and stops
// when its context ends.
func TestServe_InjectsOverTLSOnceReady(t *testing.T) {
	data, err := os.ReadFile("../../internal/inject/testdata/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseSettings([]string{"--template=" + filepath.Join(t.TempDir(), "sidecar.yaml")}, testkit.Env(map[string]string{"COLLAPSER_INJECTOR_NAMESPACE": "collapser"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Template, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "collapser", Name: s.Secret}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.WebhookConfig}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "inject.collapser.io"}}},
	).Build()
	lis := listeners{webhook: listen(t), ops: listen(t)}
	ctx, cancel := context.WithCancel(testkit.Context(t))
	done := make(chan error, 1)
	go func() { done <- serve(ctx, s, c, inject.Native, lis, slog.New(slog.DiscardHandler)) }()

	ops := "http://" + lis.ops.Addr().String()
	testkit.WaitFor(t, "/readyz 200", func() bool { return get(t, ops+"/readyz") == http.StatusOK })

	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(ctx, client.ObjectKey{Name: s.WebhookConfig}, &cfg); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("the webhook configuration has no caBundle")
	}
	resp := admit(t, ctx, "https://"+lis.webhook.Addr().String()+WebhookPath, s.dnsNames()[0], roots)
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("admission allowed %v, patch %s; want the sidecar", resp.Allowed, resp.Patch)
	}
	metrics := body(t, ops+"/metrics")
	if !strings.Contains(metrics, `collapser_injector_admissions_total{result="injected"} 1`) {
		t.Errorf("/metrics does not count the injection:\n%s", metrics)
	}

	cancel()
	if err := testkit.Recv(t, "serve's return", done); err != nil {
		t.Errorf("serve = %v, want nil after its context ended", err)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return lis
}

var httpClient = &http.Client{Timeout: testkit.DefaultTimeout}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func body(t *testing.T, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// admit posts an annotated pod's AdmissionReview over TLS, trusting roots
// for serverName, as the API server does.
func admit(t *testing.T, ctx context.Context, url, serverName string, roots *x509.CertPool) *admissionv1.AdmissionResponse {
	t.Helper()
	pod, err := json.Marshal(corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{inject.AnnotationInject: "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "team",
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: pod}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tlsClient := &http.Client{Timeout: testkit.DefaultTimeout, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}}}
	defer tlsClient.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tlsClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Response == nil {
		t.Fatalf("decode response: %v", err)
	}
	return out.Response
}
