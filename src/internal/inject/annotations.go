package inject

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The pod annotations the injector reads, and the namespace label that
// opts a whole namespace in.
const (
	// AnnotationInject opts a pod in ("true") or out ("false").
	AnnotationInject = prefix + "inject"
	// AnnotationBackendPort is the port the workload serves gRPC on, on
	// loopback; the sidecar forwards there. Default: the template's backend.
	AnnotationBackendPort = prefix + "backend-port"
	// AnnotationPort is the sidecar's gRPC port, named PortName, that the
	// workload's Service targets. Default: the template's gRPC port.
	AnnotationPort = prefix + "port"
	// AnnotationMetricsPort is the sidecar's Prometheus port, named
	// MetricsPortName. Default: the template's metrics port.
	AnnotationMetricsPort = prefix + "metrics-port"
	// AnnotationPeers names a headless Service in the pod's namespace that
	// selects the workload's pods and exposes the peer port: its sidecars
	// collapse calls across replicas. Default: no peers.
	AnnotationPeers = prefix + "peers"
	// AnnotationReplicas names a headless Service in the pod's namespace
	// that selects every pod of the workload, ready or not
	// (publishNotReadyAddresses: true; the workload's owner creates it), and
	// exposes the peer port, with AnnotationPeers: purges are taken to
	// every pod it lists, so that a pod out of the peers Service (not
	// ready) takes them too. Default: the peers Service, of ready pods only.
	AnnotationReplicas = prefix + "replicas"
	// AnnotationPeerPort is the port peers forward calls to, named
	// PeerPortName, with AnnotationPeers. Default: the template's.
	AnnotationPeerPort = prefix + "peer-port"
	// AnnotationPeerTokenSecret names a Secret in the pod's namespace whose
	// key token is the workload's peer token (at least 32 bytes), mounted
	// into the sidecar: every call between replicas, forwarded calls and
	// purges alike, carries it, and a peer port takes none without it.
	// Required with AnnotationPeers: a pod that names peers without it is
	// refused.
	AnnotationPeerTokenSecret = prefix + "peer-token-secret"
	// AnnotationPeerTLSSecret names a Secret in the pod's namespace with
	// tls.crt, tls.key and ca.crt (a cert-manager Certificate's), mounted
	// into the sidecar, with AnnotationPeers: the replicas call each other
	// over mutual TLS, each accepting only a certificate the CA signed that
	// carries the identity of its own (its first URI SAN, else its first
	// DNS SAN). Default: a certificate the injector issues for the workload
	// (Injector.PeerCertificates), with the identity of its namespace and
	// peers Service, in the Secret PeerSecretName names.
	AnnotationPeerTLSSecret = prefix + "peer-tls-secret"
	// AnnotationTLSSecret names a Secret in the pod's namespace with tls.crt
	// and tls.key (kubernetes.io/tls), mounted into the sidecar at tlsDir:
	// the sidecar serves callers TLS, as the workload did, and its probes ask
	// its metrics port over HTTP (the kubelet's gRPC probe speaks plain text
	// only). Default: plain text.
	AnnotationTLSSecret = prefix + "tls-secret"
	// AnnotationTLSClientCA, "true" with AnnotationTLSSecret, asks every
	// caller for a certificate signed by the Secret's ca.crt (mutual TLS).
	// Default: "false".
	AnnotationTLSClientCA = prefix + "tls-client-ca"
	// AnnotationBackendTLS, "true", has the sidecar call the workload over
	// TLS, verified against the system's roots unless
	// AnnotationBackendTLSCASecret names a CA. Default: "false".
	AnnotationBackendTLS = prefix + "backend-tls"
	// AnnotationBackendTLSServerName is the DNS name the workload's
	// certificate is verified for, with AnnotationBackendTLS. Default: the
	// backend's host, 127.0.0.1.
	AnnotationBackendTLSServerName = prefix + "backend-tls-server-name"
	// AnnotationBackendTLSCASecret names a Secret in the pod's namespace
	// whose ca.crt verifies the workload's certificate, mounted into the
	// sidecar at backendTLSDir, with AnnotationBackendTLS. Default: the
	// system's roots.
	AnnotationBackendTLSCASecret = prefix + "backend-tls-ca-secret"
	// AnnotationPolicy names a ConfigMap in the pod's namespace whose
	// policy.yaml is the sidecar's per-method policy. Default: none.
	AnnotationPolicy = prefix + "policy-configmap"
	// AnnotationCacheTTL is the default rule's cache TTL, a Go duration.
	// Default: the template's.
	AnnotationCacheTTL = prefix + "cache-ttl"

	// NamespaceLabel with the value NamespaceEnabled injects every pod of
	// the namespace that does not set AnnotationInject to "false".
	NamespaceLabel   = prefix + "inject"
	NamespaceEnabled = "enabled"

	prefix = "collapser.io/"
)

// settings are one pod's values for the sidecar; a zero or empty field
// keeps the template's.
type settings struct {
	backendPort int32
	port        int32
	metricsPort int32
	peerPort    int32
	peers       string
	replicas    string
	peerToken   string
	peerTLS     string
	policy      string
	cacheTTL    string

	tls                  string // the callers' TLS Secret
	tlsClientCA          bool
	backendTLS           bool
	backendTLSServerName string
	backendTLSCA         string // the Secret of the backend's CA
}

// annotationParsers read each per-pod annotation into settings. Each
// returns the accepted values when the value is not one of them.
var annotationParsers = map[string]func(s *settings, v string) (accepted string){
	AnnotationBackendPort: portParser(func(s *settings) *int32 { return &s.backendPort }),
	AnnotationPort:        portParser(func(s *settings) *int32 { return &s.port }),
	AnnotationMetricsPort: portParser(func(s *settings) *int32 { return &s.metricsPort }),
	AnnotationPeerPort:    portParser(func(s *settings) *int32 { return &s.peerPort }),
	AnnotationPeers: nameParser(validation.IsDNS1035Label, "the name of a headless Service in the pod's namespace (a DNS-1035 label)",
		func(s *settings) *string { return &s.peers }),
	AnnotationReplicas: nameParser(validation.IsDNS1035Label, "the name of a headless Service in the pod's namespace that publishes not-ready addresses (a DNS-1035 label)",
		func(s *settings) *string { return &s.replicas }),
	AnnotationPeerTokenSecret: nameParser(validation.IsDNS1123Subdomain, "the name of a Secret in the pod's namespace (a DNS-1123 subdomain) whose key token is the peer token",
		func(s *settings) *string { return &s.peerToken }),
	AnnotationPeerTLSSecret: nameParser(validation.IsDNS1123Subdomain, "the name of a Secret in the pod's namespace (a DNS-1123 subdomain) with tls.crt, tls.key and ca.crt",
		func(s *settings) *string { return &s.peerTLS }),
	AnnotationTLSSecret: nameParser(validation.IsDNS1123Subdomain, "the name of a Secret in the pod's namespace (a DNS-1123 subdomain) with tls.crt and tls.key",
		func(s *settings) *string { return &s.tls }),
	AnnotationTLSClientCA: boolParser(func(s *settings) *bool { return &s.tlsClientCA }),
	AnnotationBackendTLS:  boolParser(func(s *settings) *bool { return &s.backendTLS }),
	AnnotationBackendTLSServerName: nameParser(validation.IsDNS1123Subdomain, "the DNS name the backend's certificate is issued for (a DNS-1123 subdomain)",
		func(s *settings) *string { return &s.backendTLSServerName }),
	AnnotationBackendTLSCASecret: nameParser(validation.IsDNS1123Subdomain, "the name of a Secret in the pod's namespace (a DNS-1123 subdomain) with ca.crt",
		func(s *settings) *string { return &s.backendTLSCA }),
	AnnotationPolicy: nameParser(validation.IsDNS1123Subdomain, "the name of a ConfigMap in the pod's namespace (a DNS-1123 subdomain)",
		func(s *settings) *string { return &s.policy }),
	AnnotationCacheTTL: func(s *settings, v string) string {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return `a Go duration of 0 or more, such as "100ms", "2s" or "0s" (collapse in flight only)`
		}
		s.cacheTTL = d.String()
		return ""
	},
}

func portParser(field func(*settings) *int32) func(*settings, string) string {
	return func(s *settings, v string) string {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || !validPort(int32(p)) {
			return "a port number from 1 to 65535"
		}
		*field(s) = int32(p)
		return ""
	}
}

// nameParser reads a name that valid finds no fault in; accepted says what
// it names.
func nameParser(valid func(string) []string, accepted string, field func(*settings) *string) func(*settings, string) string {
	return func(s *settings, v string) string {
		if len(valid(v)) > 0 {
			return accepted
		}
		*field(s) = v
		return ""
	}
}

func boolParser(field func(*settings) *bool) func(*settings, string) string {
	return func(s *settings, v string) string {
		if v != "true" && v != "false" {
			return `"true" or "false"`
		}
		*field(s) = v == "true"
		return ""
	}
}

// parseSettings reads the per-pod annotations. It returns a rejection for
// every bad value, and a warning for every collapser.io/ annotation it does
// not know.
func parseSettings(annotations map[string]string) (settings, []string, []string) {
	var s settings
	var rejections, warnings []string
	for _, name := range slices.Sorted(maps.Keys(annotations)) {
		v := annotations[name]
		if name == AnnotationInject || !strings.HasPrefix(name, prefix) {
			continue
		}
		parse, ok := annotationParsers[name]
		if !ok {
			warnings = append(warnings, fmt.Sprintf("annotation %s is not a collapser setting and is ignored; the settings are %s", name, strings.Join(slices.Sorted(maps.Keys(annotationParsers)), ", ")))
			continue
		}
		if accepted := parse(&s, v); accepted != "" {
			rejections = append(rejections, fmt.Sprintf("annotation %s: %q is not valid; want %s", name, v, accepted))
		}
	}
	peers, tls, backendTLS := s.peers != "", s.tls != "", s.backendTLS
	for _, a := range []struct {
		name, needs string
		set, has    bool // whether the annotation is set, and the one it needs
	}{
		{AnnotationPeerPort, AnnotationPeers, s.peerPort != 0, peers},
		{AnnotationPeerTokenSecret, AnnotationPeers, s.peerToken != "", peers},
		{AnnotationPeerTLSSecret, AnnotationPeers, s.peerTLS != "", peers},
		{AnnotationReplicas, AnnotationPeers, s.replicas != "", peers},
		{AnnotationTLSClientCA, AnnotationTLSSecret, s.tlsClientCA, tls},
		{AnnotationBackendTLSServerName, AnnotationBackendTLS + `: "true"`, s.backendTLSServerName != "", backendTLS},
		{AnnotationBackendTLSCASecret, AnnotationBackendTLS + `: "true"`, s.backendTLSCA != "", backendTLS},
	} {
		if a.set && !a.has {
			warnings = append(warnings, fmt.Sprintf("annotation %s is ignored without %s", a.name, a.needs))
		}
	}
	if s.peers != "" && s.peerToken == "" {
		rejections = append(rejections, fmt.Sprintf("annotation %s needs %s: every call between replicas carries the release's peer token (at least 32 bytes)", AnnotationPeers, AnnotationPeerTokenSecret))
	}
	return s, rejections, warnings
}
