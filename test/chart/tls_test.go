package chart

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
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
		plaintext  bool // the sidecar is told to call its peers in plain text
	}{
		{"one pod, no peers", nil, "", false, false},
		{"peers, TLS off", []string{"replicaCount=3", "peers.tls.enabled=false"}, "", false, true},
		{"one pod, TLS off", []string{"peers.tls.enabled=false"}, "", false, false},
		{"an existing Secret", []string{"replicaCount=3", "peers.tls.existingSecret=app-peer-tls"}, "app-peer-tls", false, false},
		{"peers", []string{"replicaCount=3"}, fullname + "-peer-tls", true, false},
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
			env := envMap(sidecarOf(t, spec))
			for name := range peerTLSEnv {
				if _, ok := env[name]; ok && tt.wantSecret == "" {
					t.Errorf("%s set without peer TLS", name)
				}
			}
			// The sidecar refuses peers without TLS unless told to talk
			// plain text, and refuses to be told so with TLS or without peers.
			if got, ok := env["COLLAPSER_PEER_PLAINTEXT"]; ok != tt.plaintext || ok && got != "true" {
				t.Errorf("COLLAPSER_PEER_PLAINTEXT = %q (set %v), want set to true: %v", got, ok, tt.plaintext)
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

func TestRender_PeerCertificateFromCertManager(t *testing.T) {
	withPeers := []string{"replicaCount=3", "peers.tls.certManager.enabled=true"}
	for _, tt := range []struct {
		name       string
		set        []string
		wantIssuer issuerRef
		bootstrap  bool // the release's own CA: self-signed Issuer, CA Certificate, CA Issuer
	}{
		{"a CA of the release's own", withPeers, issuerRef{Name: fullname + "-peers-ca", Kind: "Issuer", Group: "cert-manager.io"}, true},
		{"the cluster's issuer", append(withPeers, "peers.tls.certManager.issuerRef.name=corp-ca", "peers.tls.certManager.issuerRef.kind=ClusterIssuer"),
			issuerRef{Name: "corp-ca", Kind: "ClusterIssuer"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := render(t, "", tt.set...)
			c := r.certificates[fullname+"-peer-tls"]
			if c == nil {
				t.Fatalf("no Certificate %s-peer-tls; rendered %v", fullname, r.kinds())
			}
			wantURI := "spiffe://cluster.local/ns/" + namespace + "/collapser/" + fullname
			if c.Spec.SecretName != fullname+"-peer-tls" || !slices.Equal(c.Spec.URIs, []string{wantURI}) ||
				!slices.Equal(c.Spec.DNSNames, []string{fullname + "-replicas." + namespace + ".svc"}) {
				t.Errorf("Certificate secret %q, URIs %v, DNS names %v; want %s-peer-tls, the release's SPIFFE ID %s first, the replicas Service",
					c.Spec.SecretName, c.Spec.URIs, c.Spec.DNSNames, fullname, wantURI)
			}
			for _, usage := range []string{"server auth", "client auth"} {
				if !slices.Contains(c.Spec.Usages, usage) {
					t.Errorf("usages %v lack %q: a replica is server and client of the others", c.Spec.Usages, usage)
				}
			}
			if c.Spec.IssuerRef != tt.wantIssuer {
				t.Errorf("issuer %+v, want %+v", c.Spec.IssuerRef, tt.wantIssuer)
			}
			_, selfSigned := r.issuers[fullname+"-peers-selfsigned"]
			_, ca := r.certificates[fullname+"-peers-ca"]
			if selfSigned != tt.bootstrap || ca != tt.bootstrap {
				t.Errorf("self-signed Issuer %v, CA Certificate %v; want both %v", selfSigned, ca, tt.bootstrap)
			}
			if r.secrets[fullname+"-peer-tls"] != nil {
				t.Error("the chart made the peer-tls Secret too: cert-manager owns it")
			}
			if got, mounted := peerTLSVolume(t, r.deployments[fullname].Spec.Template.Spec); got != fullname+"-peer-tls" || !mounted {
				t.Errorf("peer-tls volume from %q, mounted %v; want cert-manager's Secret", got, mounted)
			}
		})
	}
}
