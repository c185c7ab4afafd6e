// Package webhook answers the API server's pod admissions with the
// collapser sidecar: it decodes the pod, reads its namespace's labels when
// the pod does not say itself whether it wants the sidecar, and returns
// inject's patch, rejection and warnings.
//
// The AdmissionReview envelope is controller-runtime's
// (sigs.k8s.io/controller-runtime/pkg/webhook/admission): it decodes v1
// and v1beta1 reviews, bounds the body, checks the content type, echoes the
// UID, encodes the patch and recovers a panic, all of which a handler of
// our own would redo. Its PatchResponseFromRaw is not used: it diffs the
// request against a re-encoded pod, and drops the fields this binary's API
// version does not know; inject builds add-only patches instead.
package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/collapser/collapser/src/internal/inject"
	"github.com/collapser/collapser/src/internal/inject/certs"
)

// Handler is the admission handler of pod creations.
type Handler struct {
	injector   inject.Injector
	namespaces client.Reader
	peers      PeerIssuer // nil: no peer certificates issued
	metrics    *Metrics
	logger     *slog.Logger
}

// PeerIssuer issues the peer certificate of a workload (certs.Peers).
type PeerIssuer interface {
	Ensure(ctx context.Context, req certs.PeerRequest) error
}

// New returns the webhook, an http.Handler of AdmissionReviews, that
// injects with injector, reads namespaces' labels through namespaces and,
// unless peers is nil, has peers issue the peer certificate a pod mounts
// before it is admitted (not for a dry run: the webhook's sideEffects are
// NoneOnDryRun).
func New(injector inject.Injector, namespaces client.Reader, peers PeerIssuer, metrics *Metrics, logger *slog.Logger) *admission.Webhook {
	injector.PeerCertificates = peers != nil
	h := &Handler{injector: injector, namespaces: namespaces, peers: peers, metrics: metrics, logger: logger}
	return &admission.Webhook{
		Handler: h,
		LogConstructor: func(_ logr.Logger, req *admission.Request) logr.Logger {
			return admission.DefaultLogConstructor(logr.FromSlogHandler(logger.Handler()), req)
		},
	}
}

// Handle answers one admission and counts its result.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, result := h.handle(ctx, req)
	h.metrics.admissions.WithLabelValues(result).Inc()
	h.metrics.duration.Observe(time.Since(start).Seconds())
	if result == ResultError || result == ResultRejected {
		h.logger.Warn("pod admission "+result, "namespace", req.Namespace, "name", podName(req), "reason", resp.Result.Message)
	}
	return resp
}

func (h *Handler) handle(ctx context.Context, req admission.Request) (admission.Response, string) {
	if req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.Operation != admissionv1.Create {
		return admission.Allowed("not a pod creation"), ResultSkipped
	}
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode pod: %w", err)), ResultError
	}
	var labels map[string]string
	if _, decided := pod.Annotations[inject.AnnotationInject]; !decided {
		var ns corev1.Namespace
		if err := h.namespaces.Get(ctx, client.ObjectKey{Name: req.Namespace}, &ns); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("read namespace %s: %w", req.Namespace, err)), ResultError
		}
		labels = ns.Labels
	}
	res, err := h.injector.Inject(&pod, req.Namespace, labels)
	var rejection *inject.Rejection
	switch {
	case errors.As(err, &rejection):
		return admission.Denied(rejection.Error()), ResultRejected
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err), ResultError
	case len(res.Patch) == 0:
		return admission.Allowed("").WithWarnings(res.Warnings...), ResultSkipped
	}
	if res.PeerCertificate != nil && (req.DryRun == nil || !*req.DryRun) {
		if err := h.peers.Ensure(ctx, *res.PeerCertificate); err != nil {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("issue the peer certificate of %s/%s: %w", req.Namespace, res.PeerCertificate.Service, err)), ResultError
		}
	}
	return admission.Patched("collapser sidecar injected", res.Patch...).WithWarnings(res.Warnings...), ResultInjected
}

// podName is the pod's name, or its generateName for a pod of a controller.
func podName(req admission.Request) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata struct {
			GenerateName string `json:"generateName"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(req.Object.Raw, &meta) // a pod that does not decode was answered already
	return meta.Metadata.GenerateName
}

// OptedIn is the namespace reader of the webhook the API server calls only
// for the pods of namespaces labelled inject.NamespaceLabel=NamespaceEnabled
// (its namespaceSelector says so): it answers that label without reading
// the namespace.
var OptedIn client.Reader = optedIn{}

// optedIn answers every namespace Get with the opt-in label.
type optedIn struct{}

// Get implements client.Reader for namespaces.
func (optedIn) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return fmt.Errorf("read %T %s: this reader knows only namespaces", obj, key)
	}
	ns.Name, ns.Labels = key.Name, map[string]string{inject.NamespaceLabel: inject.NamespaceEnabled}
	return nil
}

// List implements client.Reader; it lists nothing.
func (optedIn) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("list: the opted-in namespace reader only answers Get")
}
