package certs

import (
	"crypto/x509"
	"fmt"
	"time"

	"github.com/collapser/collapser/src/internal/pki"
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
	valid := pki.Window{NotBefore: now.Add(-clockSkew), NotAfter: now.Add(validity)}
	ca, err := pki.NewCA("collapser-injector CA "+now.UTC().Format(time.RFC3339), valid)
	if err != nil {
		return issued{}, fmt.Errorf("make webhook CA: %w", err)
	}
	leaf, err := pki.Issue(ca, pki.Leaf{
		Name:     dnsNames[0],
		DNSNames: dnsNames,
		Usages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		Valid:    valid,
	})
	if err != nil {
		return issued{}, fmt.Errorf("issue webhook serving certificate: %w", err)
	}
	var iss issued
	if iss.caCert, iss.caKey, err = ca.PEM(); err != nil {
		return issued{}, err
	}
	if iss.cert, iss.key, err = leaf.PEM(); err != nil {
		return issued{}, err
	}
	return iss, nil
}
