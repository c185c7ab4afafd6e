package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	evanjsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
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

// server serves the webhook over HTTP with namespaces "plain" and
// "enabled" (labelled collapser.io/inject=enabled), reading them through
// reader when it is not nil.
func server(t *testing.T, reader client.Reader) (*httptest.Server, *Metrics) {
	t.Helper()
	h, metrics := newWebhook(t, reader, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, metrics
}

// newWebhook is the webhook injecting the chart's default template, with
// namespaces "plain" and "enabled" (labelled collapser.io/inject=enabled),
// read through reader when it is not nil, issuing peer certificates
// through peers when it is not nil.
func newWebhook(tb testing.TB, reader client.Reader, peers PeerIssuer) (http.Handler, *Metrics) {
	tb.Helper()
	data, err := os.ReadFile("../testdata/template.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	tmpl, err := inject.ParseTemplate(data)
	if err != nil {
		tb.Fatal(err)
	}
	if reader == nil {
		reader = fake.NewClientBuilder().WithObjects(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "enabled", Labels: map[string]string{inject.NamespaceLabel: inject.NamespaceEnabled}}},
		).Build()
	}
	metrics, err := NewMetrics(prometheus.NewPedanticRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return New(inject.Injector{Template: tmpl}, reader, peers, metrics, slog.New(slog.DiscardHandler)), metrics
}

// review posts an AdmissionReview v1 of obj's creation in namespace, as the
// API server does, and returns the response.
func review(t *testing.T, srv *httptest.Server, namespace string, kind metav1.GroupVersionKind, op admissionv1.Operation, obj []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	return post(t, srv, reviewJSON(t, namespace, kind, op, obj))
}

// post posts the AdmissionReview body and returns the response.
func post(t *testing.T, srv *httptest.Server, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(testkit.Context(t), http.MethodPost, srv.URL+"/inject", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &got); err != nil || got.Response == nil {
		t.Fatalf("response %s: %v", out, err)
	}
	if got.Response.UID != "uid-1" {
		t.Errorf("response UID %q, want the request's", got.Response.UID)
	}
	return got.Response
}

// reviewJSON is the AdmissionReview v1 the API server sends for obj's
// operation in namespace.
func reviewJSON(tb testing.TB, namespace string, kind metav1.GroupVersionKind, op admissionv1.Operation, obj []byte) []byte {
	tb.Helper()
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("uid-1"), Kind: kind, Namespace: namespace, Operation: op,
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Object:   runtime.RawExtension{Raw: obj},
		},
	}
	body, err := json.Marshal(ar)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func podJSON(tb testing.TB, annotations map[string]string) []byte {
	tb.Helper()
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "app-", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:1"}}},
	}
	data, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

func TestWebhook_Results(t *testing.T) {
	optIn := map[string]string{inject.AnnotationInject: "true"}
	tests := []struct {
		name      string
		namespace string
		kind      metav1.GroupVersionKind
		op        admissionv1.Operation
		obj       []byte
		result    string
		allowed   bool
		patched   bool
		message   string
		warning   string
	}{
		{"annotated pod", "plain", podKind, admissionv1.Create, podJSON(t, optIn), ResultInjected, true, true, "", "no container declares port 50051"},
		{"pod of an enabled namespace", "enabled", podKind, admissionv1.Create, podJSON(t, nil), ResultInjected, true, true, "", ""},
		{"pod of a plain namespace", "plain", podKind, admissionv1.Create, podJSON(t, nil), ResultSkipped, true, false, "", ""},
		{"pod opted out", "enabled", podKind, admissionv1.Create, podJSON(t, map[string]string{inject.AnnotationInject: "false"}), ResultSkipped, true, false, "", ""},
		{"bad annotation", "plain", podKind, admissionv1.Create, podJSON(t, map[string]string{inject.AnnotationInject: "true", inject.AnnotationPort: "x"}), ResultRejected, false, false,
			`annotation collapser.io/port: "x" is not valid; want a port number from 1 to 65535`, ""},
		{"update", "plain", podKind, admissionv1.Update, podJSON(t, optIn), ResultSkipped, true, false, "not a pod creation", ""},
		{"not a pod", "plain", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, admissionv1.Create, []byte(`{}`), ResultSkipped, true, false, "not a pod creation", ""},
		{"undecodable pod", "plain", podKind, admissionv1.Create, []byte(`{"spec": 1}`), ResultError, false, false, "decode pod", ""},
		{"unknown namespace", "gone", podKind, admissionv1.Create, podJSON(t, nil), ResultError, false, false, "read namespace gone", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, metrics := server(t, nil)
			resp := review(t, srv, tt.namespace, tt.kind, tt.op, tt.obj)
			if resp.Allowed != tt.allowed || (len(resp.Patch) > 0) != tt.patched {
				t.Errorf("allowed %v, patch %s; want allowed %v, patched %v (%+v)", resp.Allowed, resp.Patch, tt.allowed, tt.patched, resp.Result)
			}
			if tt.message != "" && (resp.Result == nil || !strings.Contains(resp.Result.Message, tt.message)) {
				t.Errorf("result %+v, want a message containing %q", resp.Result, tt.message)
			}
			if tt.warning != "" && (len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], tt.warning)) {
				t.Errorf("warnings %q, want one containing %q", resp.Warnings, tt.warning)
			}
			for _, r := range []string{ResultInjected, ResultSkipped, ResultRejected, ResultError} {
				want := 0.0
				if r == tt.result {
					want = 1
				}
				if got := testutil.ToFloat64(metrics.admissions.WithLabelValues(r)); got != want {
					t.Errorf("admissions{result=%q} = %v, want %v", r, got, want)
				}
			}
		})
	}
}

// TestWebhook_PatchAddsTheSidecar applies the returned patch as the API
// server does and sends the result again (reinvocation): it is left as it is.
func TestWebhook_PatchAddsTheSidecar(t *testing.T) {
	srv, metrics := server(t, nil)
	obj := podJSON(t, map[string]string{inject.AnnotationInject: "true"})
	resp := review(t, srv, "plain", podKind, admissionv1.Create, obj)
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("patch type %v, want JSONPatch", resp.PatchType)
	}
	patch, err := evanjsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := patch.Apply(obj)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(patched, &pod); err != nil {
		t.Fatal(err)
	}
	if len(pod.Spec.InitContainers) != 1 || pod.Spec.InitContainers[0].Name != "collapser" {
		t.Fatalf("init containers %+v, want the collapser sidecar", pod.Spec.InitContainers)
	}
	again := review(t, srv, "plain", podKind, admissionv1.Create, patched)
	if !again.Allowed || len(again.Patch) != 0 {
		t.Errorf("reinvocation: allowed %v, patch %s; want allowed and no patch", again.Allowed, again.Patch)
	}
	if got := testutil.ToFloat64(metrics.admissions.WithLabelValues(ResultSkipped)); got != 1 {
		t.Errorf("skipped admissions = %v, want 1", got)
	}
}

// TestWebhook_NamespaceReadOnlyWhenUndecided reads the namespace only for a
// pod that does not say whether it wants the sidecar.
func TestWebhook_NamespaceReadOnlyWhenUndecided(t *testing.T) {
	reads := 0
	reader := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			reads++
			return errors.New("API server unreachable")
		},
	}).Build()
	srv, _ := server(t, reader)
	if resp := review(t, srv, "plain", podKind, admissionv1.Create, podJSON(t, map[string]string{inject.AnnotationInject: "true"})); !resp.Allowed || reads != 0 {
		t.Errorf("annotated pod: allowed %v after %d namespace reads, want allowed after none", resp.Allowed, reads)
	}
	if resp := review(t, srv, "plain", podKind, admissionv1.Create, podJSON(t, nil)); resp.Allowed || reads != 1 || !strings.Contains(resp.Result.Message, "API server unreachable") {
		t.Errorf("undecided pod: allowed %v, %+v after %d reads; want an error after 1", resp.Allowed, resp.Result, reads)
	}
}

// TestWebhook_OptedInNamespacesAreNotRead: the webhook of opted-in
// namespaces injects a pod that does not decide, honours one that opts out,
// and reads nothing.
func TestWebhook_OptedInNamespacesAreNotRead(t *testing.T) {
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		result      string
	}{
		{"undecided", nil, ResultInjected},
		{"opted out", map[string]string{inject.AnnotationInject: "false"}, ResultSkipped},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, metrics := server(t, OptedIn)
			resp := review(t, srv, "never-read", podKind, admissionv1.Create, podJSON(t, tt.annotations))
			if !resp.Allowed || testutil.ToFloat64(metrics.admissions.WithLabelValues(tt.result)) != 1 {
				t.Errorf("allowed %v (%+v), want allowed and counted %s", resp.Allowed, resp.Result, tt.result)
			}
		})
	}
	var cm corev1.ConfigMap
	if err := OptedIn.Get(context.Background(), client.ObjectKey{Name: "x"}, &cm); err == nil {
		t.Error("OptedIn read a ConfigMap, want an error: it knows only namespaces")
	}
}

// issuer records the peer certificates asked of it, and fails with err.
type issuer struct {
	asked []certs.PeerRequest
	err   error
}

func (i *issuer) Ensure(_ context.Context, req certs.PeerRequest) error {
	i.asked = append(i.asked, req)
	return i.err
}

// TestWebhook_IssuesThePeerCertificateBeforeThePodIsAdmitted: a pod with
// peers and no certificate of its own is admitted once its certificate is
// issued, refused when it cannot be, and a dry run issues nothing.
func TestWebhook_IssuesThePeerCertificateBeforeThePodIsAdmitted(t *testing.T) {
	peers := map[string]string{inject.AnnotationInject: "true", inject.AnnotationPeers: "app-pods", inject.AnnotationPeerTokenSecret: "app-token"}
	want := certs.PeerRequest{Namespace: "plain", Service: "app-pods", Secret: inject.PeerSecretName("app-pods")}
	dryRun := func(body []byte) []byte {
		var ar admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &ar); err != nil {
			t.Fatal(err)
		}
		yes := true
		ar.Request.DryRun = &yes
		out, err := json.Marshal(ar)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		dryRun  bool
		err     error
		allowed bool
		asked   int
	}{
		{"issued", false, nil, true, 1},
		{"issuer fails", false, errors.New("secrets is forbidden"), false, 1},
		{"dry run", true, nil, true, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			iss := &issuer{err: tt.err}
			h, metrics := newWebhook(t, nil, iss)
			srv := httptest.NewServer(h)
			defer srv.Close()
			body := reviewJSON(t, "plain", podKind, admissionv1.Create, podJSON(t, peers))
			if tt.dryRun {
				body = dryRun(body)
			}
			resp := post(t, srv, body)
			if resp.Allowed != tt.allowed || (len(resp.Patch) > 0) != tt.allowed {
				t.Errorf("allowed %v, patch %s, %+v; want allowed and patched: %v", resp.Allowed, resp.Patch, resp.Result, tt.allowed)
			}
			if len(iss.asked) != tt.asked || tt.asked > 0 && iss.asked[0] != want {
				t.Errorf("asked %+v, want %d of %+v", iss.asked, tt.asked, want)
			}
			if tt.err != nil && (resp.Result == nil || !strings.Contains(resp.Result.Message, tt.err.Error()) || testutil.ToFloat64(metrics.admissions.WithLabelValues(ResultError)) != 1) {
				t.Errorf("result %+v, want the issuer's error, counted as %s", resp.Result, ResultError)
			}
		})
	}
}
