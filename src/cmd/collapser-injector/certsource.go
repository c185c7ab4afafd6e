package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/collapser/collapser/src/internal/inject/certs"
)

// certSource is where the webhook's certificate comes from: the server
// serves what GetCertificate returns, answers /readyz with Ready, and runs
// Run (renewal or reload, every --cert-check-interval) while it serves.
type certSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	Ready() error
	Run(ctx context.Context, interval time.Duration)
}

// newCertSource returns the source the settings name: the files in
// --cert-dir that another issuer keeps (cert-manager), or else the
// injector's own CA and certificate, kept in --secret and trusted through
// --webhook-config, which it writes through c.
func newCertSource(s settings, c client.Client, logger *slog.Logger) (certSource, error) {
	if s.CertDir != "" {
		files, err := certs.NewFiles(certs.FilesOptions{Dir: s.CertDir, DNSNames: s.dnsNames()}, logger)
		if err != nil {
			return nil, err
		}
		return files, nil
	}
	rotator, err := certs.New(c, certs.Options{
		Secret:   types.NamespacedName{Namespace: s.Namespace, Name: s.Secret},
		Webhook:  s.WebhookConfig,
		DNSNames: s.dnsNames(),
		Validity: s.CertValidity,
	}, logger)
	if err != nil {
		return nil, err
	}
	return rotator, nil
}

// newPeerCerts returns the issuer of workloads' peer certificates, whose CA
// is kept in --peer-ca-secret and whose identities are in trustDomain (the
// cluster's domain), or nil when --peer-ca-secret is empty.
func newPeerCerts(s settings, trustDomain string, c client.Client, logger *slog.Logger) (*certs.Peers, error) {
	if s.PeerCASecret == "" {
		return nil, nil
	}
	return certs.NewPeers(c, certs.PeersOptions{
		CASecret:     types.NamespacedName{Namespace: s.Namespace, Name: s.PeerCASecret},
		TrustDomain:  trustDomain,
		CAValidity:   s.PeerCAValidity,
		CertValidity: s.PeerCertValidity,
		TrustLead:    peerTrustLead,
	}, logger)
}
