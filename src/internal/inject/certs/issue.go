package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// clockSkew backdates every certificate, so that an API server whose clock
// is a little behind already accepts it.
const clockSkew = 5 * time.Minute

// issued is a new CA and the serving certificate it signed, in PEM.
type issued struct {
	caCert, caKey, cert, key []byte
}

// issue makes a CA and a serving certificate for dnsNames, both valid from
// now (backdated by clockSkew) for validity. Keys are ECDSA P-256.
func issue(dnsNames []string, now time.Time, validity time.Duration) (issued, error) {
	notBefore, notAfter := now.Add(-clockSkew), now.Add(validity)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, fmt.Errorf("generate CA key: %w", err)
	}
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "collapser-injector CA " + now.UTC().Format(time.RFC3339)},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := sign(caTemplate, caTemplate, caKey, caKey)
	if err != nil {
		return issued{}, fmt.Errorf("sign CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return issued{}, fmt.Errorf("parse CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return issued{}, fmt.Errorf("generate serving key: %w", err)
	}
	der, err := sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: dnsNames[0]},
		DNSNames:    dnsNames,
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, key, caKey)
	if err != nil {
		return issued{}, fmt.Errorf("sign serving certificate: %w", err)
	}
	caKeyPEM, err := keyPEM(caKey)
	if err != nil {
		return issued{}, err
	}
	servingKeyPEM, err := keyPEM(key)
	if err != nil {
		return issued{}, err
	}
	return issued{caCert: certPEM(caDER), caKey: caKeyPEM, cert: certPEM(der), key: servingKeyPEM}, nil
}

// sign returns the DER of template signed by parent's key, with a random
// serial number.
func sign(template, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	template.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, template, parent, key.Public(), parentKey)
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// parseCerts returns the certificates of a PEM bundle, skipping blocks
// that are not certificates or do not parse.
func parseCerts(bundle []byte) []*x509.Certificate {
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
