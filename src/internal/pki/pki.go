// Package pki issues X.509 certificates with ECDSA P-256 keys: a
// self-signed CA, the leaf certificates it signs for DNS names, IP
// addresses and URIs (SPIFFE ids), and their PEM. The injector's own CA
// (inject/certs) and the certificates of tests (pkitest) are made with it.
package pki

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
	"time"
)

// serialLimit bounds the random serial numbers: 128 bits, within RFC 5280's
// 20 octets.
var serialLimit = new(big.Int).Lsh(big.NewInt(1), 128)

// Window is when a certificate is valid.
type Window struct{ NotBefore, NotAfter time.Time }

// KeyPair is a certificate and its private key.
type KeyPair struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Leaf says whom a leaf certificate is for, what for and when.
type Leaf struct {
	Name     string             // the subject's common name
	DNSNames []string           // DNS SANs
	IPs      []net.IP           // IP address SANs
	URIs     []*url.URL         // URI SANs, such as SPIFFE ids
	Usages   []x509.ExtKeyUsage // server authentication, client authentication or both
	Valid    Window
}

// NewCA makes a self-signed CA named name, valid in valid, that signs leaf
// certificates only (no intermediate CAs).
func NewCA(name string, valid Window) (KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             valid.NotBefore,
		NotAfter:              valid.NotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, nil)
}

// Issue makes a new key and a certificate of leaf for it, signed by ca.
func Issue(ca KeyPair, leaf Leaf) (KeyPair, error) {
	return sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: leaf.Name},
		DNSNames:    leaf.DNSNames,
		IPAddresses: leaf.IPs,
		URIs:        leaf.URIs,
		NotBefore:   leaf.Valid.NotBefore,
		NotAfter:    leaf.Valid.NotAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: leaf.Usages,
	}, &ca)
}

// sign makes a key and the certificate of tmpl for it, with a random
// serial number, signed by parent or, when parent is nil, by the new key
// itself.
func sign(tmpl *x509.Certificate, parent *KeyPair) (KeyPair, error) {
	name := tmpl.Subject.CommonName
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generate key of %q: %w", name, err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, serialLimit); err != nil {
		return KeyPair{}, fmt.Errorf("serial number of %q: %w", name, err)
	}
	signer := KeyPair{Cert: tmpl, Key: key}
	if parent != nil {
		signer = *parent
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, key.Public(), signer.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("sign %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return KeyPair{}, fmt.Errorf("parse %q: %w", name, err)
	}
	return KeyPair{Cert: cert, Key: key}, nil
}

// PEM returns the certificate and its key (PKCS #8) in PEM, as
// tls.X509KeyPair reads them.
func (p KeyPair) PEM() (cert, key []byte, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(p.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key of %q: %w", p.Cert.Subject.CommonName, err)
	}
	return CertPEM(p.Cert), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// CertPEM returns c in PEM.
func CertPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// ParseCerts returns the certificates of a PEM bundle, skipping blocks
// that are not certificates or do not parse.
func ParseCerts(bundle []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}
