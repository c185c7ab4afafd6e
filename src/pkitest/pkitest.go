// Package pkitest issues certificates for tests and load programs: a CA, and
// certificates of an identity it signs, written as a Secret volume holds
// them (tls.crt, tls.key, ca.crt). Production certificates come from the
// chart, cert-manager or the injector (package inject/certs).
package pkitest

import (
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/collapser/collapser/src/internal/pki"
)

// validity is how long what this package issues is valid, from an hour ago.
const validity = 24 * time.Hour

// CA is a certificate authority: it signs the certificates of one identity
// or of several.
type CA struct {
	pair pki.KeyPair
}

// Files are the paths of a certificate, its key and the CA that signed it,
// in one directory.
type Files struct{ Cert, Key, CA string }

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	ca, err := pki.NewCA(name, window())
	if err != nil {
		return nil, fmt.Errorf("pkitest: %w", err)
	}
	return &CA{pair: ca}, nil
}

// PEM returns the CA's certificate in PEM.
func (ca *CA) PEM() []byte { return pki.CertPEM(ca.pair.Cert) }

// Issue writes into dir (made if missing) a certificate for identity, a URI
// SAN when it has a scheme (spiffe://...), else a DNS SAN, with localhost
// and 127.0.0.1 as further names, usable by a server and a client; its key;
// and the CA's certificate, as tls.crt, tls.key and ca.crt. Issuing into
// the same dir again replaces them, as a renewal does.
func (ca *CA) Issue(dir, identity string) (Files, error) {
	leaf := pki.Leaf{
		Name:     identity,
		DNSNames: []string{"localhost"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1)},
		Usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Valid:    window(),
	}
	if strings.Contains(identity, "://") {
		u, err := url.Parse(identity)
		if err != nil {
			return Files{}, fmt.Errorf("pkitest: identity %q: %w", identity, err)
		}
		leaf.URIs = []*url.URL{u}
	} else {
		leaf.DNSNames = []string{identity, "localhost"}
	}
	pair, err := pki.Issue(ca.pair, leaf)
	if err != nil {
		return Files{}, fmt.Errorf("pkitest: %w", err)
	}
	cert, key, err := pair.PEM()
	if err != nil {
		return Files{}, fmt.Errorf("pkitest: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("pkitest: %w", err)
	}
	f := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), CA: filepath.Join(dir, "ca.crt")}
	for _, w := range []struct {
		path string
		data []byte
	}{{f.Cert, cert}, {f.Key, key}, {f.CA, ca.PEM()}} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return Files{}, fmt.Errorf("pkitest: %w", err)
		}
	}
	return f, nil
}

// window is when what this package issues now is valid: from an hour ago
// until validity from now.
func window() pki.Window {
	now := time.Now()
	return pki.Window{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity)}
}
