// Package pkitest issues certificates for tests and load programs: a CA, and
// certificates of an identity it signs, written as a Secret volume holds
// them (tls.crt, tls.key, ca.crt). Production certificates come from the
// chart, cert-manager or the injector (package inject/certs).
package pkitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// validity is how long what this package issues is valid, from an hour ago.
const validity = 24 * time.Hour

// CA is a certificate authority: it signs the certificates of one identity
// or of several.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// Files are the paths of a certificate, its key and the CA that signed it,
// in one directory.
type Files struct{ Cert, Key, CA string }

// NewCA makes a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pkitest: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := sign(tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pkitest: parse CA: %w", err)
	}
	return &CA{cert: cert, key: key, pem: pemBlock("CERTIFICATE", der)}, nil
}

// PEM returns the CA's certificate in PEM.
func (ca *CA) PEM() []byte { return ca.pem }

// Issue writes into dir (made if missing) a certificate for identity, a URI
// SAN when it has a scheme (spiffe://...), else a DNS SAN, with localhost
// and 127.0.0.1 as further names, usable by a server and a client; its key;
// and the CA's certificate, as tls.crt, tls.key and ca.crt. Issuing into
// the same dir again replaces them, as a renewal does.
func (ca *CA) Issue(dir, identity string) (Files, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, fmt.Errorf("pkitest: key: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: identity},
		NotBefore:   time.Now().Add(-time.Hour),
		NotAfter:    time.Now().Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	if strings.Contains(identity, "://") {
		u, err := url.Parse(identity)
		if err != nil {
			return Files{}, fmt.Errorf("pkitest: identity %q: %w", identity, err)
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.DNSNames = []string{identity, "localhost"}
	}
	der, err := sign(tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Files{}, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Files{}, fmt.Errorf("pkitest: key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("pkitest: %w", err)
	}
	f := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"), CA: filepath.Join(dir, "ca.crt")}
	for _, w := range []struct {
		path string
		data []byte
	}{{f.Cert, pemBlock("CERTIFICATE", der)}, {f.Key, pemBlock("PRIVATE KEY", keyDER)}, {f.CA, ca.pem}} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			return Files{}, fmt.Errorf("pkitest: %w", err)
		}
	}
	return f, nil
}

// sign returns the DER of tmpl signed by parent's key, with a random serial.
func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, key *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return nil, fmt.Errorf("pkitest: serial: %w", err)
	}
	tmpl.SerialNumber = serial
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, key)
	if err != nil {
		return nil, fmt.Errorf("pkitest: sign %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// pemBlock encodes der as a PEM block of typ.
func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
