package chart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// certificate is what the chart renders of cert-manager's Certificate
// (cert-manager.io/v1). It is decoded strictly, so a field the chart adds
// must be added here; kubeconform (make chart-lint) holds the fields to
// cert-manager's own CRD.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		IsCA       bool     `json:"isCA"`
		CommonName string   `json:"commonName"`
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		URIs       []string `json:"uris"`
		Duration   string   `json:"duration"`
		PrivateKey struct {
			Algorithm      string `json:"algorithm"`
			Size           int    `json:"size"`
			RotationPolicy string `json:"rotationPolicy"`
		} `json:"privateKey"`
		Usages    []string  `json:"usages"`
		IssuerRef issuerRef `json:"issuerRef"`
	} `json:"spec"`
}

// issuerRef is cert-manager's reference to an issuer.
type issuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Group string `json:"group"`
}

// issuer is what the chart renders of cert-manager's Issuer: self-signed or a CA.
type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct{} `json:"selfSigned"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca"`
	} `json:"spec"`
}

var withCertManager = []string{"injector.enabled=true", "injector.certManager.enabled=true"}

// certDir is where the injector's pods mount cert-manager's Secret.
const certDir = "/etc/collapser-injector-tls"

// TestRender_InjectorCertManagerBootstrapsACAOfItsOwn: without an issuer,
// cert-manager makes the release's CA (self-signed, its key kept across
// renewals) and with it the serving certificate for the injector's
// Service, into the Secret the injector's pods mount and serve from; the
// webhook configuration asks for that certificate's CA as its caBundle.
func TestRender_InjectorCertManagerBootstrapsACAOfItsOwn(t *testing.T) {
	r := render(t, "", withCertManager...)
	selfSigned, caIssuer := r.issuers[injectorName+"-selfsigned"], r.issuers[injectorName+"-ca"]
	ca, serving := r.certificates[injectorName+"-ca"], r.certificates[injectorName]
	if selfSigned == nil || caIssuer == nil || ca == nil || serving == nil || len(r.issuers) != 2 || len(r.certificates) != 2 {
		t.Fatalf("want a self-signed Issuer, a CA Certificate, a CA Issuer and the serving Certificate; rendered %v", r.kinds())
	}
	if selfSigned.Spec.SelfSigned == nil {
		t.Errorf("Issuer %s is not self-signed: %+v", selfSigned.Name, selfSigned.Spec)
	}
	if !ca.Spec.IsCA || ca.Spec.IssuerRef != (issuerRef{Name: selfSigned.Name, Kind: "Issuer", Group: "cert-manager.io"}) || ca.Spec.PrivateKey.RotationPolicy != "Never" {
		t.Errorf("CA Certificate %+v, want isCA, signed by %s, its key kept across renewals", ca.Spec, selfSigned.Name)
	}
	if caIssuer.Spec.CA == nil || caIssuer.Spec.CA.SecretName != ca.Spec.SecretName {
		t.Errorf("CA Issuer %+v, want the CA Certificate's Secret %s", caIssuer.Spec, ca.Spec.SecretName)
	}
	if serving.Spec.IssuerRef != (issuerRef{Name: caIssuer.Name, Kind: "Issuer", Group: "cert-manager.io"}) {
		t.Errorf("serving Certificate issued by %+v, want the CA Issuer %s", serving.Spec.IssuerRef, caIssuer.Name)
	}
	checkServingCertificate(t, r, serving)
}

// TestRender_InjectorCertManagerTakesTheGivenIssuer: with an issuerRef,
// only the serving certificate is rendered, issued by that issuer.
func TestRender_InjectorCertManagerTakesTheGivenIssuer(t *testing.T) {
	r := render(t, "", append(withCertManager, "injector.certManager.issuerRef.name=corp-ca", "injector.certManager.issuerRef.kind=ClusterIssuer")...)
	serving := r.certificates[injectorName]
	if serving == nil || len(r.certificates) != 1 || len(r.issuers) != 0 {
		t.Fatalf("want the serving Certificate alone; rendered %v", r.kinds())
	}
	if serving.Spec.IssuerRef != (issuerRef{Name: "corp-ca", Kind: "ClusterIssuer"}) {
		t.Errorf("issuerRef %+v, want the values' corp-ca ClusterIssuer", serving.Spec.IssuerRef)
	}
	checkServingCertificate(t, r, serving)
}

// checkServingCertificate holds the injector to serving the Certificate:
// valid for the names the injector derives from its Service and namespace
// (src/cmd/collapser-injector, settings.dnsNames), for injector.certValidity,
// in the Secret its pods mount at --cert-dir; the caBundle comes from it
// through cert-manager's CA injector, and the injector writes nothing and
// may write nothing: no Secret of its own, no RBAC for it or the webhook
// configuration.
func checkServingCertificate(t *testing.T, r *rendered, serving *certificate) {
	t.Helper()
	wantNames := []string{injectorName + "." + namespace + ".svc", injectorName + "." + namespace, injectorName}
	if !slices.Equal(serving.Spec.DNSNames, wantNames) || serving.Spec.Duration != "8760h" || serving.Spec.SecretName != injectorName+"-tls" ||
		!slices.Contains(serving.Spec.Usages, "server auth") || serving.Spec.IsCA {
		t.Errorf("serving Certificate %+v, want a server certificate for %v valid injector.certValidity (8760h) in %s-tls", serving.Spec, wantNames, injectorName)
	}
	if got := r.mutatingWebhooks[injectorName].Annotations["cert-manager.io/inject-ca-from"]; got != namespace+"/"+serving.Name {
		t.Errorf("webhook configuration's cert-manager.io/inject-ca-from = %q, want %s/%s", got, namespace, serving.Name)
	}
	if want := "kubectl --namespace lab get certificate " + serving.Name; !strings.Contains(r.notes, want) {
		t.Errorf("NOTES do not say %q:\n%s", want, r.notes)
	}

	spec := r.deployments[injectorName].Spec.Template.Spec
	c := spec.Containers[0]
	env := envMap(c)
	if env["COLLAPSER_INJECTOR_CERT_DIR"] != certDir || env["COLLAPSER_INJECTOR_SERVICE"] != injectorName {
		t.Errorf("injector env %v, want COLLAPSER_INJECTOR_CERT_DIR=%s and the Service whose names the certificate holds", env, certDir)
	}
	for _, name := range []string{"COLLAPSER_INJECTOR_SECRET", "COLLAPSER_INJECTOR_WEBHOOK_CONFIG", "COLLAPSER_INJECTOR_CERT_VALIDITY"} {
		if _, ok := env[name]; ok {
			t.Errorf("injector env sets %s, a setting of its own CA", name)
		}
	}
	i := slices.IndexFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == certDir })
	if i < 0 || !c.VolumeMounts[i].ReadOnly {
		t.Fatalf("injector mounts %+v, want %s read-only", c.VolumeMounts, certDir)
	}
	v := spec.Volumes[slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })]
	if v.Secret == nil || v.Secret.SecretName != serving.Spec.SecretName {
		t.Errorf("volume %s is %+v, want the Certificate's Secret %s", v.Name, v.VolumeSource, serving.Spec.SecretName)
	}

	if _, ok := r.secrets[serving.Spec.SecretName]; ok {
		t.Errorf("the chart renders Secret %s, which cert-manager writes", serving.Spec.SecretName)
	}
	// Its own Secret is its peer CA's only: cert-manager writes the serving one.
	if role := r.roles[injectorName]; len(r.roles) != 1 || len(role.Rules) != 1 || !slices.Equal(role.Rules[0].ResourceNames, []string{injectorName + "-peer-ca"}) {
		t.Errorf("Roles %v: want access to the injector's peer CA Secret only", r.roles)
	}
	rules := r.clusterRoles[injectorName].Rules
	if len(rules) != 2 || !slices.Equal(rules[0].Resources, []string{"namespaces"}) || !slices.Equal(rules[0].Verbs, []string{"get"}) ||
		!slices.Equal(rules[1].Resources, []string{"secrets"}) || !slices.Equal(rules[1].Verbs, []string{"create", "patch"}) {
		t.Errorf("ClusterRole rules %+v, want reading namespaces, and creating and patching the Secrets of workloads' peer certificates", rules)
	}
}

func TestRender_InjectorCertManagerWithoutItsCRDFailsClearly(t *testing.T) {
	_, err := renderWith(loadChart(t), userValues(t, "", withCertManager...), capabilities())
	if err == nil {
		t.Fatal("rendered cert-manager's Certificate for a cluster without its CRD")
	}
	for _, want := range []string{"injector.certManager.enabled", "no cert-manager.io/v1 Certificate", "install cert-manager first", "--api-versions cert-manager.io/v1/Certificate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
