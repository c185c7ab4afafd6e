package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/collapser/collapser/src/internal/inject"
	"github.com/collapser/collapser/src/internal/inject/certs"
	"github.com/collapser/collapser/src/internal/testkit"
)

// TestServe_InjectsOverTLSOnceReady runs the injector against a fake API
// server: it becomes ready once it serves a certificate its webhook
// configuration trusts and holds a peer CA, injects a pod with peers over
// that TLS, issues its workload's peer certificate, counts it, and stops
// when its context ends.
func TestServe_InjectsOverTLSOnceReady(t *testing.T) {
	s := injectorSettings(t)
	c := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "collapser", Name: s.Secret}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "collapser", Name: s.PeerCASecret}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.WebhookConfig}, Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "inject.collapser.io"}}},
	).Build()
	inj := startServe(t, s, c)
	testkit.WaitFor(t, "/readyz 200", func() bool { return get(t, inj.ops+"/readyz") == http.StatusOK })

	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(testkit.Context(t), client.ObjectKey{Name: s.WebhookConfig}, &cfg); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("the webhook configuration has no caBundle")
	}
	peers := map[string]string{inject.AnnotationInject: "true", inject.AnnotationPeers: "app-pods", inject.AnnotationPeerTokenSecret: "app-token"}
	resp := admit(t, testkit.Context(t), inj.webhook, s.dnsNames()[0], roots, peers)
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("admission allowed %v, patch %s, %+v; want the sidecar", resp.Allowed, resp.Patch, resp.Result)
	}
	var issued corev1.Secret
	if err := c.Get(testkit.Context(t), types.NamespacedName{Namespace: "team", Name: inject.PeerSecretName("app-pods")}, &issued); err != nil || len(issued.Data[corev1.TLSCertKey]) == 0 {
		t.Errorf("the workload's peer certificate: %v, %v", issued.Data, err)
	}
	metrics := body(t, inj.ops+"/metrics")
	if !strings.Contains(metrics, `collapser_injector_admissions_total{result="injected"} 1`) {
		t.Errorf("/metrics does not count the injection:\n%s", metrics)
	}
	if err := inj.stop(); err != nil {
		t.Errorf("serve = %v, want nil after its context ended", err)
	}
}

// TestServe_CertDirServesTheMountedCertificateAndWritesNothing: with
// --cert-dir the injector is unready until the issuer's files are there,
// then serves them within a check interval, and never writes to the API
// server (cert-manager keeps the Secret and the caBundle), when it issues
// no peer certificates either.
func TestServe_CertDirServesTheMountedCertificateAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	s := injectorSettings(t, "--cert-dir="+dir, "--cert-check-interval=10ms", "--peer-ca-secret=")
	var writes atomic.Int32
	refuse := func(obj client.Object) error {
		writes.Add(1)
		return fmt.Errorf("the injector wrote %T %s", obj, obj.GetName())
	}
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			return refuse(obj)
		},
		Update: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.UpdateOption) error {
			return refuse(obj)
		},
		Patch: func(_ context.Context, _ client.WithWatch, obj client.Object, _ client.Patch, _ ...client.PatchOption) error {
			return refuse(obj)
		},
	}).Build()
	inj := startServe(t, s, c)
	if code := get(t, inj.ops+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz without certificate files = %d, want 503", code)
	}

	ca := writeCertificate(t, dir, s)
	testkit.WaitFor(t, "/readyz 200", func() bool { return get(t, inj.ops+"/readyz") == http.StatusOK })
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	resp := admit(t, testkit.Context(t), inj.webhook, s.dnsNames()[0], roots, map[string]string{inject.AnnotationInject: "true"})
	if !resp.Allowed || len(resp.Patch) == 0 {
		t.Errorf("admission allowed %v, patch %s; want the sidecar", resp.Allowed, resp.Patch)
	}
	if err := inj.stop(); err != nil {
		t.Errorf("serve = %v, want nil after its context ended", err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("the injector wrote %d objects with --cert-dir, want none", n)
	}
}

// injectorSettings are the injector's settings for args in namespace
// collapser, its template the one of the chart's defaults.
func injectorSettings(t *testing.T, args ...string) settings {
	t.Helper()
	data, err := os.ReadFile("../../internal/inject/testdata/template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	template := filepath.Join(t.TempDir(), "sidecar.yaml")
	if err := os.WriteFile(template, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := parseSettings(append([]string{"--template=" + template}, args...), testkit.Env(map[string]string{"COLLAPSER_INJECTOR_NAMESPACE": "collapser"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// injector is a running serve: the URLs of its ops server and webhook.
type injector struct {
	ops, webhook string
	stop         func() error // ends serve's context and returns what serve returned
}

// startServe runs serve with s against the API server c until the test
// ends or stop is called.
func startServe(t *testing.T, s settings, c client.Client) injector {
	t.Helper()
	lis := listeners{webhook: listen(t), ops: listen(t)}
	ctx, cancel := context.WithCancel(testkit.Context(t))
	done := make(chan error, 1)
	go func() { done <- serve(ctx, s, c, inject.Native, lis, slog.New(slog.DiscardHandler)) }()
	var served error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			served = testkit.Recv(t, "serve's return", done)
		}
		return served
	}
	t.Cleanup(func() { _ = stop() })
	return injector{ops: "http://" + lis.ops.Addr().String(), webhook: "https://" + lis.webhook.Addr().String() + WebhookPath, stop: stop}
}

// writeCertificate writes a serving certificate for the injector's names
// into dir, as cert-manager's mounted Secret holds it, and returns its CA.
// The injector's own rotator issues it, into a scratch API server.
func writeCertificate(t *testing.T, dir string, s settings) []byte {
	t.Helper()
	scratch := fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Secret}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: s.WebhookConfig}},
	).Build()
	rotator, err := certs.New(scratch, certs.Options{Secret: types.NamespacedName{Namespace: s.Namespace, Name: s.Secret}, Webhook: s.WebhookConfig, DNSNames: s.dnsNames(), Validity: time.Hour},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := rotator.Sync(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := scratch.Get(testkit.Context(t), types.NamespacedName{Namespace: s.Namespace, Name: s.Secret}, &secret); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{certs.KeyCert, certs.KeyKey} {
		if err := os.WriteFile(filepath.Join(dir, key), secret.Data[key], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return secret.Data[certs.KeyCA]
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

// admit posts the AdmissionReview of a pod with annotations over TLS,
// trusting roots for serverName, as the API server does.
func admit(t *testing.T, ctx context.Context, url, serverName string, roots *x509.CertPool, annotations map[string]string) *admissionv1.AdmissionResponse {
	t.Helper()
	pod, err := json.Marshal(corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
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
