package pkitest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestIssue_TheIdentityIsTheFirstSANOfItsKind(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM())
	for _, tt := range []struct{ identity, uri, dns string }{
		{"spiffe://cluster.local/ns/shop/collapser/hello", "spiffe://cluster.local/ns/shop/collapser/hello", "localhost"},
		{"hello.shop.svc", "", "hello.shop.svc"},
	} {
		f, err := ca.Issue(t.TempDir(), tt.identity)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		leaf := pair.Leaf
		if got := leaf.DNSNames[0]; got != tt.dns {
			t.Errorf("%s: first DNS SAN %q, want %q", tt.identity, got, tt.dns)
		}
		if tt.uri != "" && (len(leaf.URIs) != 1 || leaf.URIs[0].String() != tt.uri) {
			t.Errorf("%s: URI SANs %v, want %s", tt.identity, leaf.URIs, tt.uri)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s for usage %v: %v", tt.identity, usage, err)
			}
		}
	}
}

func TestIssue_AnIdentityWithASchemeThatDoesNotParseIsAnError(t *testing.T) {
	ca, err := NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ca.Issue(t.TempDir(), "spiffe://cluster.local/%zz"); err == nil {
		t.Error("Issue = nil error, want the identity's parse error")
	}
}
