package pki_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/pki"
)

var (
	t0    = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	valid = pki.Window{NotBefore: t0.Add(-5 * time.Minute), NotAfter: t0.Add(time.Hour)}
)

func mustCA(t *testing.T, name string) pki.KeyPair {
	t.Helper()
	ca, err := pki.NewCA(name, valid)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func mustIssue(t *testing.T, ca pki.KeyPair, leaf pki.Leaf) pki.KeyPair {
	t.Helper()
	p, err := pki.Issue(ca, leaf)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func roots(cas ...pki.KeyPair) *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	return pool
}

// TestIssue_TheCertificateIsForItsNamesAndUsages: a leaf verifies against
// its CA for each of its names and usages, within its window only, and
// for no other name or usage.
func TestIssue_TheCertificateIsForItsNamesAndUsages(t *testing.T) {
	spiffe, err := url.Parse("spiffe://cluster.local/ns/shop/collapser/hello")
	if err != nil {
		t.Fatal(err)
	}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tests := []struct {
		name      string
		leaf      pki.Leaf
		hosts     []string // names it verifies for
		notHosts  []string // names it does not verify for
		notUsages []x509.ExtKeyUsage
	}{
		{
			name:      "DNS names, server only (the injector's)",
			leaf:      pki.Leaf{Name: "injector.collapser.svc", DNSNames: []string{"injector.collapser.svc", "injector"}, Usages: server, Valid: valid},
			hosts:     []string{"injector.collapser.svc", "injector"},
			notHosts:  []string{"other.collapser.svc", "127.0.0.1"},
			notUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		},
		{
			name:     "a SPIFFE id on loopback, server and client (a test replica's)",
			leaf:     pki.Leaf{Name: spiffe.String(), DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []*url.URL{spiffe}, Usages: both, Valid: valid},
			hosts:    []string{"localhost", "127.0.0.1"},
			notHosts: []string{"hello.shop.svc", "::1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca := mustCA(t, "test CA")
			leaf := mustIssue(t, ca, tt.leaf).Cert
			if leaf.Subject.CommonName != tt.leaf.Name || !leaf.NotBefore.Equal(valid.NotBefore) || !leaf.NotAfter.Equal(valid.NotAfter) {
				t.Errorf("subject %q valid %v to %v, want %q valid %v to %v", leaf.Subject.CommonName, leaf.NotBefore, leaf.NotAfter, tt.leaf.Name, valid.NotBefore, valid.NotAfter)
			}
			if !slices.EqualFunc(leaf.URIs, tt.leaf.URIs, func(a, b *url.URL) bool { return a.String() == b.String() }) {
				t.Errorf("URI SANs %v, want %v", leaf.URIs, tt.leaf.URIs)
			}
			verify := func(host string, usage x509.ExtKeyUsage, at time.Time) error {
				_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots(ca), KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: at})
				return err
			}
			for _, usage := range tt.leaf.Usages {
				for _, host := range tt.hosts {
					if err := verify(host, usage, t0); err != nil {
						t.Errorf("for %s, usage %v: %v", host, usage, err)
					}
					for _, at := range []time.Time{valid.NotBefore.Add(-time.Second), valid.NotAfter.Add(time.Second)} {
						if verify(host, usage, at) == nil {
							t.Errorf("for %s at %v, outside its window: verified", host, at)
						}
					}
				}
				for _, host := range tt.notHosts {
					if verify(host, usage, t0) == nil {
						t.Errorf("for %s: verified, want an error", host)
					}
				}
			}
			for _, usage := range tt.notUsages {
				if verify(tt.hosts[0], usage, t0) == nil {
					t.Errorf("for usage %v: verified, want an error", usage)
				}
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots(mustCA(t, "another CA")), KeyUsages: tt.leaf.Usages, CurrentTime: t0}); err == nil {
				t.Error("verified against another CA")
			}
		})
	}
}

// TestNewCA_SignsLeavesOnly: a CA's certificates verify, but a chain
// through an intermediate CA it signed does not; every certificate has a
// serial number of its own.
func TestNewCA_SignsLeavesOnly(t *testing.T) {
	ca := mustCA(t, "test CA")
	if c := ca.Cert; !c.IsCA || c.MaxPathLen != 0 || !c.MaxPathLenZero || c.Subject.CommonName != "test CA" || !c.NotAfter.Equal(valid.NotAfter) {
		t.Errorf("CA %q: IsCA %v, MaxPathLen %d (zero: %v), valid until %v", c.Subject.CommonName, c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.NotAfter)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	intermediate := pki.KeyPair{Key: key}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "intermediate"},
		NotBefore:             valid.NotBefore,
		NotAfter:              valid.NotAfter,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}, ca.Cert, intermediate.Key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	if intermediate.Cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	leaf := pki.Leaf{Name: "hello", DNSNames: []string{"hello"}, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, Valid: valid}
	intermediates := x509.NewCertPool()
	intermediates.AddCert(intermediate.Cert)
	_, err = mustIssue(t, intermediate, leaf).Cert.Verify(x509.VerifyOptions{Roots: roots(ca), Intermediates: intermediates, CurrentTime: t0})
	if invalid, ok := errors.AsType[x509.CertificateInvalidError](err); !ok || invalid.Reason != x509.TooManyIntermediates {
		t.Errorf("a chain through an intermediate: %v, want too many intermediates", err)
	}
	direct := mustIssue(t, ca, leaf).Cert
	if _, err := direct.Verify(x509.VerifyOptions{Roots: roots(ca), CurrentTime: t0}); err != nil {
		t.Errorf("a leaf of the CA: %v", err)
	}
	if again := mustIssue(t, ca, leaf).Cert; again.SerialNumber.Cmp(direct.SerialNumber) == 0 || ca.Cert.SerialNumber.Cmp(direct.SerialNumber) == 0 {
		t.Errorf("serial numbers %v, %v and the CA's %v: want three", direct.SerialNumber, again.SerialNumber, ca.Cert.SerialNumber)
	}
}

// TestKeyPair_PEMLoadsAsATLSPair: the PEM of a key pair loads with
// tls.X509KeyPair as that certificate and key.
func TestKeyPair_PEMLoadsAsATLSPair(t *testing.T) {
	ca := mustCA(t, "test CA")
	for name, p := range map[string]pki.KeyPair{
		"CA":   ca,
		"leaf": mustIssue(t, ca, pki.Leaf{Name: "hello", DNSNames: []string{"hello"}, Valid: valid}),
	} {
		cert, key, err := p.PEM()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !pair.Leaf.Equal(p.Cert) || !p.Key.Equal(pair.PrivateKey) {
			t.Errorf("%s: the PEM holds another certificate or key", name)
		}
	}
}

// TestParseCerts_ReturnsTheBundlesCertificatesInOrder: blocks that are not
// certificates, or do not parse, are skipped.
func TestParseCerts_ReturnsTheBundlesCertificatesInOrder(t *testing.T) {
	a, b := mustCA(t, "a"), mustCA(t, "b")
	_, key, err := a.PEM()
	if err != nil {
		t.Fatal(err)
	}
	garbage := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	tests := []struct {
		name   string
		bundle []byte
		want   []string
	}{
		{"none", nil, nil},
		{"not PEM", []byte("not PEM"), nil},
		{"one", pki.CertPEM(a.Cert), []string{"a"}},
		{"two, in order", slices.Concat(pki.CertPEM(b.Cert), pki.CertPEM(a.Cert)), []string{"b", "a"}},
		{"a key and a broken certificate between", slices.Concat(pki.CertPEM(a.Cert), key, garbage, pki.CertPEM(b.Cert)), []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range pki.ParseCerts(tt.bundle) {
				got = append(got, c.Subject.CommonName)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParseCerts = %q, want %q", got, tt.want)
			}
		})
	}
	if got := pki.ParseCerts(pki.CertPEM(a.Cert)); len(got) != 1 || !bytes.Equal(got[0].Raw, a.Cert.Raw) {
		t.Error("CertPEM and ParseCerts do not round-trip the certificate")
	}
}
