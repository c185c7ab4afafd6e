package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"slices"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"
)

// Identity is what a certificate says it belongs to: its first URI SAN (a
// SPIFFE ID such as spiffe://cluster.local/ns/shop/collapser/hello), or,
// for issuers that write none (Helm's genSignedCert), its first DNS SAN.
func Identity(cert *x509.Certificate) (string, error) {
	if len(cert.URIs) > 0 {
		return cert.URIs[0].String(), nil
	}
	if len(cert.DNSNames) > 0 {
		return cert.DNSNames[0], nil
	}
	return "", fmt.Errorf("tls: certificate %q names no identity (no URI or DNS SAN)", cert.Subject.CommonName)
}

// carries reports whether cert names identity among its SANs of the same
// kind.
func carries(cert *x509.Certificate, identity string) bool {
	if len(cert.URIs) > 0 {
		return slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == identity })
	}
	return slices.Contains(cert.DNSNames, identity)
}

// Mutual returns the credentials between replicas of one release or
// workload: each side presents its certificate and requires the other's,
// signed by the CA and carrying this side's own Identity, the one the
// release's certificates share. Signed by the CA is not enough: another
// release's certificate from the same issuer is refused. Peers are dialed
// by their pods' addresses, which no certificate names, so the identity
// stands in for the host name. TLS 1.3 only: both ends are collapser.
func (s *Source) Mutual() (credentials.TransportCredentials, error) {
	if s.leaf == nil || s.files.CA == "" {
		return nil, errors.New("tls: replicas need a certificate, its key and the CA that signs theirs")
	}
	if _, err := Identity(s.leaf); err != nil {
		return nil, err
	}
	return &creds{src: s, verified: true, config: func(km *certprovider.KeyMaterial) *tls.Config {
		return &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: km.Certs,
			// Both sides verify the other's chain and identity themselves,
			// against the CA as the files hold it now.
			InsecureSkipVerify: true,
			ClientAuth:         tls.RequireAnyClientCert,
			VerifyConnection:   func(cs tls.ConnectionState) error { return verifyPeer(cs, km) },
		}
	}}, nil
}

// verifyPeer checks the other replica's certificate chain against km's
// roots and its identity against this replica's certificate.
func verifyPeer(cs tls.ConnectionState, km *certprovider.KeyMaterial) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the other replica presented no certificate")
	}
	if len(km.Certs) == 0 || km.Roots == nil {
		return errors.New("tls: no certificate or CA to verify the other replica with")
	}
	own := km.Certs[0].Leaf
	if own == nil {
		var err error
		if own, err = x509.ParseCertificate(km.Certs[0].Certificate[0]); err != nil {
			return fmt.Errorf("tls: own certificate: %w", err)
		}
	}
	identity, err := Identity(own)
	if err != nil {
		return err
	}
	leaf := cs.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	// Replicas are both client and server of each other: a certificate
	// serves either side.
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: km.Roots, Intermediates: intermediates, KeyUsages: usage}); err != nil {
		return fmt.Errorf("tls: the other replica's certificate: %w", err)
	}
	if !carries(leaf, identity) {
		got, _ := Identity(leaf)
		return fmt.Errorf("tls: the other replica's certificate is %q's, not this release's %q", got, identity)
	}
	return nil
}
