package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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
	"github.com/collapser/collapser/src/internal/tlsfiles"
)

const (
	testCertValidity = 30 * 24 * time.Hour
	testCAValidity   = 365 * 24 * time.Hour
	testTrustLead    = time.Hour
)

var (
	testCASecret = types.NamespacedName{Namespace: "collapser", Name: "injector-peer-ca"}
	shop         = PeerRequest{Namespace: "shop", Service: "hello-peers", Secret: "collapser-peer-tls-hello-peers"}
)

// peerCluster returns a fake API server holding the chart's empty peer CA
// Secret and objects. Its JSON patches fail as the API server's do: a
// failed test is 422 Invalid (apiserver's jsonPatcher), where the fake
// client returns a bare error.
func peerCluster(objects ...client.Object) client.WithWatch {
	objects = append(objects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testCASecret.Namespace, Name: testCASecret.Name}})
	return fake.NewClientBuilder().WithObjects(objects...).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			err := c.Patch(ctx, obj, patch, opts...)
			if err != nil && patch.Type() == types.JSONPatchType && apierrors.ReasonForError(err) == metav1.StatusReasonUnknown {
				return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{Resource: "secrets"}, obj.GetName(), err.Error(), 0, false)
			}
			return err
		},
	}).Build()
}

func newPeers(t *testing.T, c client.Client, clk *clock) *Peers {
	t.Helper()
	p, err := NewPeers(c, PeersOptions{
		CASecret: testCASecret, TrustDomain: "cluster.local",
		CAValidity: testCAValidity, CertValidity: testCertValidity, TrustLead: testTrustLead, Now: clk.Now,
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustPeerSync(t *testing.T, p *Peers) {
	t.Helper()
	if err := p.Sync(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
}

func mustEnsure(t *testing.T, p *Peers, req PeerRequest) {
	t.Helper()
	if err := p.Ensure(testkit.Context(t), req); err != nil {
		t.Fatal(err)
	}
}

func getSecret(t *testing.T, c client.Client, key types.NamespacedName) corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(testkit.Context(t), key, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func secretOf(req PeerRequest) types.NamespacedName {
	return types.NamespacedName{Namespace: req.Namespace, Name: req.Secret}
}

// leafOf returns the workload certificate of the Secret's data, checked to
// verify, for both client and server use, against its own ca.crt at now.
func leafOf(t *testing.T, data map[string][]byte, now time.Time) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[corev1.ServiceAccountRootCAKey]) {
		t.Fatal("no CA in ca.crt")
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth} {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("certificate does not verify for %v against its ca.crt: %v", usage, err)
		}
	}
	return pair.Leaf
}

// listed returns the Secrets the CA's Secret lists as issued.
func listed(t *testing.T, c client.Client) []string {
	t.Helper()
	var list []issuedCert
	if err := json.Unmarshal(getSecret(t, c, testCASecret).Data[KeyIssued], &list); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, e := range list {
		keys = append(keys, e.key())
	}
	return keys
}

func TestPeers_IssuesEachWorkloadACertificateOfItsOwnIdentity(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	p := newPeers(t, c, clk)
	if err := p.Ready(); err == nil {
		t.Error("Ready before the first Sync = nil, want an error")
	}
	if err := p.Ensure(testkit.Context(t), shop); err == nil {
		t.Error("Ensure before the first Sync = nil, want an error")
	}
	mustPeerSync(t, p)
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready after Sync = %v", err)
	}
	other := PeerRequest{Namespace: "shop", Service: "cart-peers", Secret: "collapser-peer-tls-cart-peers"}
	mustEnsure(t, p, shop)
	mustEnsure(t, p, other)

	ids := map[string]bool{}
	for _, req := range []PeerRequest{shop, other} {
		secret := getSecret(t, c, secretOf(req))
		if secret.Labels[LabelManagedBy] != ManagedBy || secret.Type != corev1.SecretTypeTLS {
			t.Errorf("secret %s: labels %v, type %s; want %s=%s, %s", req.Secret, secret.Labels, secret.Type, LabelManagedBy, ManagedBy, corev1.SecretTypeTLS)
		}
		id, err := tlsfiles.Identity(leafOf(t, secret.Data, clk.now))
		if err != nil {
			t.Fatal(err)
		}
		if want := "spiffe://cluster.local/ns/shop/collapser/" + req.Service; id != want {
			t.Errorf("identity %q, want %q", id, want)
		}
		ids[id] = true
	}
	if len(ids) != 2 {
		t.Errorf("two workloads share identity %v", ids)
	}
	if got := listed(t, c); len(got) != 2 {
		t.Errorf("listed %v, want both workloads' secrets", got)
	}
}

func TestPeers_EnsureLeavesAListedSecretAsItIs(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	p := newPeers(t, c, clk)
	mustPeerSync(t, p)
	mustEnsure(t, p, shop)
	first := getSecret(t, c, secretOf(shop))
	clk.now = clk.now.Add(time.Minute)
	mustEnsure(t, p, shop) // the workload's second pod
	if again := getSecret(t, c, secretOf(shop)); again.ResourceVersion != first.ResourceVersion {
		t.Error("a second pod of the workload rewrote its listed secret")
	}
}

func TestPeers_EnsureTakesOverOnlyTheInjectorsSecret(t *testing.T) {
	clk := &clock{t0}
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: shop.Namespace, Name: shop.Secret}, Data: map[string][]byte{"token": []byte("the user's")}}
	madeByAnotherReplica := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cart", Name: shop.Secret, Labels: map[string]string{LabelManagedBy: ManagedBy}}}
	c := peerCluster(mine, madeByAnotherReplica)
	p := newPeers(t, c, clk)
	mustPeerSync(t, p)

	err := p.Ensure(testkit.Context(t), shop)
	if err == nil || !strings.Contains(err.Error(), "shop/"+shop.Secret) || !strings.Contains(err.Error(), "collapser.io/peer-tls-secret") {
		t.Errorf("Ensure over a secret the injector did not make = %v, want an error naming it and the annotation", err)
	}
	if got := getSecret(t, c, secretOf(shop)); string(got.Data["token"]) != "the user's" || len(got.Data) != 1 {
		t.Errorf("the user's secret was written: %v", got.Data)
	}

	cart := PeerRequest{Namespace: "cart", Service: "cart-peers", Secret: shop.Secret}
	mustEnsure(t, p, cart)
	leafOf(t, getSecret(t, c, secretOf(cart)).Data, clk.now)
	if got := listed(t, c); len(got) != 1 || got[0] != "cart/"+shop.Secret {
		t.Errorf("listed %v, want only the secret taken over", got)
	}
}

func TestPeers_SyncRenewsDueCertificatesAndDropsDeletedSecrets(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	p := newPeers(t, c, clk)
	mustPeerSync(t, p)
	gone := PeerRequest{Namespace: "shop", Service: "gone", Secret: "collapser-peer-tls-gone"}
	mustEnsure(t, p, shop)
	mustEnsure(t, p, gone)
	before := leafOf(t, getSecret(t, c, secretOf(shop)).Data, clk.now)

	clk.now = clk.now.Add(testCertValidity / 2)
	mustPeerSync(t, p)
	if got := leafOf(t, getSecret(t, c, secretOf(shop)).Data, clk.now); !got.Equal(before) {
		t.Error("renewed at half of its validity, want at two thirds")
	}

	if err := c.Delete(testkit.Context(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: gone.Namespace, Name: gone.Secret}}); err != nil {
		t.Fatal(err)
	}
	clk.now = t0.Add(testCertValidity * 2 / 3).Add(time.Minute)
	mustPeerSync(t, p)
	after := leafOf(t, getSecret(t, c, secretOf(shop)).Data, clk.now)
	if after.Equal(before) || !after.NotAfter.After(before.NotAfter) {
		t.Errorf("not renewed at two thirds of its validity: valid until %v, was %v", after.NotAfter, before.NotAfter)
	}
	if got := listed(t, c); len(got) != 1 || got[0] != "shop/"+shop.Secret {
		t.Errorf("listed %v, want the deleted secret dropped", got)
	}
}

// TestPeers_ANewCAIsTrustedEverywhereBeforeItSigns walks a CA renewal: the
// new CA reaches every workload's ca.crt at the next Sync and signs only
// after the trust lead, so a replica whose volume still holds the previous
// Secret accepts its peers' renewed certificates, and the other way round.
func TestPeers_ANewCAIsTrustedEverywhereBeforeItSigns(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	p := newPeers(t, c, clk)
	mustPeerSync(t, p)
	mustEnsure(t, p, shop)
	old := getSecret(t, c, secretOf(shop)).Data

	clk.now = t0.Add(testCAValidity * 2 / 3).Add(time.Minute)
	mustPeerSync(t, p)
	trusting := getSecret(t, c, secretOf(shop)).Data
	if n := len(pki.ParseCerts(trusting[corev1.ServiceAccountRootCAKey])); n != 2 {
		t.Fatalf("ca.crt holds %d CAs after the CA's renewal, want the new and the previous", n)
	}
	if !sameIssuer(leafOf(t, trusting, clk.now), parseLeaf(t, old)) {
		t.Error("the new CA signed before every workload trusted it")
	}

	clk.now = clk.now.Add(testTrustLead)
	mustPeerSync(t, p)
	signed := getSecret(t, c, secretOf(shop)).Data
	renewed := leafOf(t, signed, clk.now)
	if sameIssuer(renewed, parseLeaf(t, old)) {
		t.Error("the previous CA still signs after the trust lead")
	}
	// Each side verifies the other with the ca.crt it holds.
	for _, pair := range []struct{ leaf, bundleOf map[string][]byte }{{signed, trusting}, {trusting, signed}} {
		leafOf(t, map[string][]byte{
			corev1.TLSCertKey: pair.leaf[corev1.TLSCertKey], corev1.TLSPrivateKeyKey: pair.leaf[corev1.TLSPrivateKeyKey],
			corev1.ServiceAccountRootCAKey: pair.bundleOf[corev1.ServiceAccountRootCAKey],
		}, clk.now)
	}

	clk.now = t0.Add(testCAValidity).Add(time.Minute)
	mustPeerSync(t, p)
	if n := len(pki.ParseCerts(getSecret(t, c, secretOf(shop)).Data[corev1.ServiceAccountRootCAKey])); n != 1 {
		t.Errorf("ca.crt holds %d CAs after the previous one expired, want 1", n)
	}
}

func TestPeers_TwoReplicasOfTheInjectorListEveryWorkload(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	a, b := newPeers(t, c, clk), newPeers(t, c, clk)
	mustPeerSync(t, a)
	mustPeerSync(t, b)
	var wg sync.WaitGroup
	for i, p := range []*Peers{a, b, a, b} {
		wg.Go(func() {
			req := PeerRequest{Namespace: "shop", Service: "svc", Secret: "s" + string(rune('0'+i))}
			if err := p.Ensure(testkit.Context(t), req); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := listed(t, c); len(got) != 4 {
		t.Errorf("listed %v, want the 4 secrets both replicas made", got)
	}
}

// parseLeaf returns the workload certificate of the Secret's data.
func parseLeaf(t *testing.T, data map[string][]byte) *x509.Certificate {
	t.Helper()
	certs := pki.ParseCerts(data[corev1.TLSCertKey])
	if len(certs) != 1 {
		t.Fatalf("tls.crt holds %d certificates, want 1", len(certs))
	}
	return certs[0]
}

// sameIssuer reports whether one CA key signed a and b.
func sameIssuer(a, b *x509.Certificate) bool {
	return string(a.AuthorityKeyId) == string(b.AuthorityKeyId)
}

// TestPeers_TwoReplicasStartingTogetherAgreeOnOneCA: the replica whose
// first write of the CA conflicts with the other's reads it again at once
// and is ready with the CA the other wrote.
func TestPeers_TwoReplicasStartingTogetherAgreeOnOneCA(t *testing.T) {
	clk := &clock{t0}
	c := peerCluster()
	a, b := newPeers(t, c, clk), newPeers(t, c, clk)
	var stale corev1.Secret // b's read, before a wrote the CA
	if err := c.Get(testkit.Context(t), testCASecret, &stale); err != nil {
		t.Fatal(err)
	}
	mustPeerSync(t, a)
	racing := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if s, ok := obj.(*corev1.Secret); ok && key == testCASecret && stale.ResourceVersion != "" {
			stale.DeepCopyInto(s) // the read that raced a's write
			stale.ResourceVersion = ""
			return nil
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	b.client = interceptor.NewClient(c, racing)
	if err := b.Sync(testkit.Context(t)); err != nil {
		t.Fatalf("Sync after a conflicting write = %v, want it read again", err)
	}
	if err := b.Ready(); err != nil {
		t.Fatal(err)
	}
	if got, want := caSerial(b.current().signer.Cert), caSerial(a.current().signer.Cert); got != want {
		t.Errorf("b signs with CA %s, a with %s: one CA, the first written", got, want)
	}
}
