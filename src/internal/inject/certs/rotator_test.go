package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/collapser/collapser/src/internal/pki"
	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	testDNSName  = "injector.collapser.svc"
	testValidity = time.Hour
)

var (
	testSecret = types.NamespacedName{Namespace: "collapser", Name: "injector-tls"}
	t0         = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// clock is a settable time.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// cluster returns a fake API server holding the chart's empty Secret and
// webhook configuration (two webhooks), with funcs intercepting calls.
func cluster(funcs interceptor.Funcs) client.WithWatch {
	return fake.NewClientBuilder().WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testSecret.Namespace, Name: testSecret.Name}},
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "collapser-injector"},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "a.collapser.io"}, {Name: "b.collapser.io"}},
		},
	).WithInterceptorFuncs(funcs).Build()
}

func newRotator(t *testing.T, c client.Client, clk *clock) *Rotator {
	t.Helper()
	r, err := New(c, Options{Secret: testSecret, Webhook: "collapser-injector", DNSNames: []string{testDNSName, "injector"}, Validity: testValidity, Now: clk.Now},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustSync(t *testing.T, r *Rotator) {
	t.Helper()
	if err := r.Sync(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
}

// state reads the Secret and the caBundles of the webhook configuration.
func state(t *testing.T, c client.Client) (corev1.Secret, [][]byte) {
	t.Helper()
	var secret corev1.Secret
	if err := c.Get(testkit.Context(t), testSecret, &secret); err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := c.Get(testkit.Context(t), client.ObjectKey{Name: "collapser-injector"}, &cfg); err != nil {
		t.Fatal(err)
	}
	var bundles [][]byte
	for _, w := range cfg.Webhooks {
		bundles = append(bundles, w.ClientConfig.CABundle)
	}
	return secret, bundles
}

// served returns the certificate r serves.
func served(t *testing.T, r *Rotator) *x509.Certificate {
	t.Helper()
	c, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

// trusted reports whether leaf verifies for testDNSName against bundle at now.
func trusted(leaf *x509.Certificate, bundle []byte, now time.Time) bool {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: testDNSName, Roots: roots, CurrentTime: now})
	return err == nil
}

func TestSync_IssuesIntoTheEmptySecret(t *testing.T) {
	clk := &clock{t0}
	c := cluster(interceptor.Funcs{})
	r := newRotator(t, c, clk)
	if err := r.Ready(); err == nil {
		t.Error("Ready before the first Sync = nil, want an error")
	}
	mustSync(t, r)
	secret, bundles := state(t, c)
	for _, k := range []string{KeyCA, KeyCAKey, KeyCert, KeyKey} {
		if len(secret.Data[k]) == 0 {
			t.Errorf("secret has no %s", k)
		}
	}
	for i, b := range bundles {
		if string(b) != string(secret.Data[KeyCA]) {
			t.Errorf("webhook %d caBundle is not the secret's %s", i, KeyCA)
		}
	}
	leaf := served(t, r)
	if !trusted(leaf, bundles[0], t0) {
		t.Error("the served certificate does not verify against the caBundle")
	}
	if got := leaf.NotAfter; !got.Equal(t0.Add(testValidity)) {
		t.Errorf("NotAfter = %v, want %v", got, t0.Add(testValidity))
	}
	if err := r.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
}

// TestSync_RenewsAtTwoThirds keeps a certificate until two thirds of its
// validity have passed, then renews it; the caBundle keeps the previous CA
// until it expires, so the previous certificate stays trusted.
func TestSync_RenewsAtTwoThirds(t *testing.T) {
	clk := &clock{t0}
	c := cluster(interceptor.Funcs{})
	r := newRotator(t, c, clk)
	mustSync(t, r)
	first := served(t, r)
	firstSecret, _ := state(t, c)

	clk.now = t0.Add(testValidity*2/3 - time.Second)
	mustSync(t, r)
	if secret, _ := state(t, c); secret.ResourceVersion != firstSecret.ResourceVersion || !served(t, r).Equal(first) {
		t.Fatal("renewed before two thirds of the validity")
	}

	clk.now = t0.Add(testValidity * 2 / 3)
	mustSync(t, r)
	second := served(t, r)
	secret, bundles := state(t, c)
	if second.Equal(first) {
		t.Fatal("not renewed at two thirds of the validity")
	}
	if n := len(pki.ParseCerts(secret.Data[KeyCA])); n != 2 {
		t.Errorf("%s holds %d CAs, want the new one and the previous", KeyCA, n)
	}
	if !trusted(second, bundles[0], clk.now) || !trusted(first, bundles[0], clk.now) {
		t.Errorf("caBundle trusts the new certificate: %v, the previous: %v; want both", trusted(second, bundles[0], clk.now), trusted(first, bundles[0], clk.now))
	}

	// The next renewal drops the first CA, expired by then.
	clk.now = t0.Add(testValidity * 4 / 3)
	mustSync(t, r)
	secret, bundles = state(t, c)
	if n := len(pki.ParseCerts(secret.Data[KeyCA])); n != 2 || trusted(first, bundles[0], t0) {
		t.Errorf("%s holds %d CAs, trusts the first certificate: %v; want 2 without the first", KeyCA, n, trusted(first, bundles[0], t0))
	}
}

// TestSync_ServesAnotherReplicasRenewal: a replica whose Secret was renewed
// by another serves that certificate instead of issuing one.
func TestSync_ServesAnotherReplicasRenewal(t *testing.T) {
	clk := &clock{t0}
	c := cluster(interceptor.Funcs{})
	a, b := newRotator(t, c, clk), newRotator(t, c, clk)
	mustSync(t, a)
	mustSync(t, b)
	if !served(t, a).Equal(served(t, b)) {
		t.Fatal("two replicas serve different certificates")
	}
	clk.now = t0.Add(testValidity)
	mustSync(t, a)
	mustSync(t, b)
	if !served(t, a).Equal(served(t, b)) {
		t.Error("after a renewal, the replicas serve different certificates")
	}
}

// TestSync_ConflictReadsTheWinner: when another replica updates the Secret
// between this one's read and write, Sync reads again and serves that.
func TestSync_ConflictReadsTheWinner(t *testing.T) {
	clk := &clock{t0}
	winner := newRotator(t, cluster(interceptor.Funcs{}), clk)
	var c client.WithWatch
	conflicts := 0
	c = cluster(interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if _, ok := obj.(*corev1.Secret); ok && conflicts == 0 {
			conflicts++
			// The other replica renews first.
			winner.client = cl
			if err := winner.Sync(ctx); err != nil {
				return err
			}
			return apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, testSecret.Name, errors.New("changed"))
		}
		return cl.Update(ctx, obj, opts...)
	}})
	loser := newRotator(t, c, clk)
	mustSync(t, loser)
	if conflicts != 1 || !served(t, loser).Equal(served(t, winner)) {
		t.Errorf("after %d conflicts the loser serves its own certificate, want the winner's", conflicts)
	}
}

// TestSync_WebhookConflictIsTriedAgainAtOnce: two replicas starting
// together both write the caBundle; the one whose write conflicts reads the
// configuration again and serves, rather than wait for its next sync (seen
// on kind: a replica unready for a minute).
func TestSync_WebhookConflictIsTriedAgainAtOnce(t *testing.T) {
	conflicts := 0
	c := cluster(interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if _, ok := obj.(*admissionregistrationv1.MutatingWebhookConfiguration); ok && conflicts == 0 {
			conflicts++
			return apierrors.NewConflict(schema.GroupResource{Resource: "mutatingwebhookconfigurations"}, obj.GetName(), errors.New("changed"))
		}
		return cl.Update(ctx, obj, opts...)
	}})
	r := newRotator(t, c, &clock{t0})
	mustSync(t, r)
	if conflicts != 1 || r.Ready() != nil {
		t.Errorf("after %d conflicts: Ready() = %v, want nil: the write is tried again within the same sync", conflicts, r.Ready())
	}
}

func TestSync_Errors(t *testing.T) {
	clk := &clock{t0}
	noWebhook := fake.NewClientBuilder().WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testSecret.Namespace, Name: testSecret.Name}}).Build()
	r := newRotator(t, noWebhook, clk)
	if err := r.Sync(testkit.Context(t)); err == nil || r.Ready() == nil {
		t.Errorf("Sync without the webhook configuration = %v, Ready %v; want errors (no certificate served before its CA is trusted)", err, r.Ready())
	}
	r = newRotator(t, fake.NewClientBuilder().Build(), clk)
	if err := r.Sync(testkit.Context(t)); err == nil {
		t.Error("Sync without the secret = nil, want an error")
	}
}

func TestReady_Expired(t *testing.T) {
	clk := &clock{t0}
	r := newRotator(t, cluster(interceptor.Funcs{}), clk)
	mustSync(t, r)
	clk.now = t0.Add(testValidity + time.Second)
	if err := r.Ready(); err == nil {
		t.Error("Ready with an expired certificate = nil, want an error")
	}
}

// TestGetCertificate_ServesTLS: a client that trusts the caBundle completes
// a handshake with a server using GetCertificate.
func TestGetCertificate_ServesTLS(t *testing.T) {
	c := cluster(interceptor.Funcs{})
	r := newRotator(t, c, &clock{time.Now()})
	mustSync(t, r)
	_, bundles := state(t, c)
	if err := handshake(t, r.GetCertificate, bundles[0]); err != nil {
		t.Fatalf("handshake: %v", err)
	}
}

// handshake serves TLS with getCertificate and returns the error of a
// client's handshake for testDNSName that trusts the CAs of bundle.
func handshake(t *testing.T, getCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error), bundle []byte) error {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{GetCertificate: getCertificate, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(bundle)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: testkit.DefaultTimeout}, "tcp", srv.Listener.Addr().String(), &tls.Config{RootCAs: roots, ServerName: testDNSName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	return conn.Close()
}
