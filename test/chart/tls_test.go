package chart

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// peerTLSEnv is where the sidecar is told to read its peer certificate.
var peerTLSEnv = map[string]string{
	"COLLAPSER_PEER_TLS_CERT_FILE": "/etc/collapser/peer-tls/tls.crt",
	"COLLAPSER_PEER_TLS_KEY_FILE":  "/etc/collapser/peer-tls/tls.key",
	"COLLAPSER_PEER_TLS_CA_FILE":   "/etc/collapser/peer-tls/ca.crt",
}

// peerTLSVolume returns the Secret the pods' peer-tls volume mounts, "" for
// none, and whether the sidecar mounts it.
func peerTLSVolume(t *testing.T, spec corev1.PodSpec) (secret string, mounted bool) {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name == "peer-tls" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	for _, m := range sidecarOf(t, spec).VolumeMounts {
		mounted = mounted || m.Name == "peer-tls"
	}
	return secret, mounted
}

func TestRender_PeersTalkMutualTLSWithACertificateOfTheRelease(t *testing.T) {
	r := render(t, "", "replicaCount=3")
	secret := r.secrets[fullname+"-peer-tls"]
	if secret == nil {
		t.Fatalf("no Secret %s-peer-tls", fullname)
	}
	data := func(k string) []byte {
		if v, ok := secret.Data[k]; ok {
			return v
		}
		return []byte(secret.StringData[k])
	}
	pair, err := tls.X509KeyPair(data("tls.crt"), data("tls.key"))
	if err != nil {
		t.Fatalf("tls.crt and tls.key: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data("ca.crt")) {
		t.Fatal("ca.crt holds no certificate")
	}
	// What a replica checks of another: the CA, both usages, the identity.
	want := fullname + "-replicas." + namespace + ".svc"
	if got := pair.Leaf.DNSNames; len(got) == 0 || got[0] != want {
		t.Errorf("DNS SANs %v, want the identity %s first", got, want)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("the certificate for usage %v: %v", usage, err)
		}
	}
	spec := r.deployments[fullname].Spec.Template.Spec
	if got, mounted := peerTLSVolume(t, spec); got != fullname+"-peer-tls" || !mounted {
		t.Errorf("peer-tls volume from %q, mounted %v; want the Secret %s-peer-tls, mounted", got, mounted, fullname)
	}
	env := map[string]string{}
	for _, e := range sidecarOf(t, spec).Env {
		env[e.Name] = e.Value
	}
	for k, v := range peerTLSEnv {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestRender_PeerTLSFollowsItsValues(t *testing.T) {
	for _, tt := range []struct {
		name       string
		set        []string
		wantSecret string // the Secret the pods mount; "" for none
		chartMade  bool
	}{
		{"one pod, no peers", nil, "", false},
		{"peers, TLS off", []string{"replicaCount=3", "peers.tls.enabled=false"}, "", false},
		{"an existing Secret", []string{"replicaCount=3", "peers.tls.existingSecret=app-peer-tls"}, "app-peer-tls", false},
		{"peers", []string{"replicaCount=3"}, fullname + "-peer-tls", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, "", tt.set...)
			if made := r.secrets[fullname+"-peer-tls"] != nil; made != tt.chartMade {
				t.Errorf("the chart made its peer-tls Secret: %v, want %v", made, tt.chartMade)
			}
			spec := r.deployments[fullname].Spec.Template.Spec
			got, mounted := peerTLSVolume(t, spec)
			if got != tt.wantSecret || mounted != (tt.wantSecret != "") {
				t.Errorf("peer-tls volume from %q, mounted %v; want %q", got, mounted, tt.wantSecret)
			}
			for _, e := range sidecarOf(t, spec).Env {
				if _, ok := peerTLSEnv[e.Name]; ok && tt.wantSecret == "" {
					t.Errorf("%s set without peer TLS", e.Name)
				}
			}
		})
	}
}

func TestRender_ATLSListenerIsProbedThroughTheMetricsPort(t *testing.T) {
	r := render(t, "", "collapser.config.tlsCertFile=/etc/tls/tls.crt", "collapser.config.tlsKeyFile=/etc/tls/tls.key")
	c := sidecarOf(t, r.deployments[fullname].Spec.Template.Spec)
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/livez"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.GRPC != nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.IntValue() != 2112 {
			t.Errorf("%s probe %+v, want GET %s on the metrics port 2112: the kubelet's gRPC probe speaks no TLS", p.name, p.probe, p.path)
		}
	}
}
