// Package certs keeps the injector's certificates: Peers issues injected
// workloads' peer certificates (see its doc), and the rest of the package
// gives the injector the TLS certificate it serves the API server with,
// from one of two sources behind the same two methods,
// GetCertificate (for tls.Config) and Ready (the injector's readiness: a
// certificate is served and valid now):
//
//   - Rotator, without cert-manager (the Vault agent injector's
//     -tls-auto): it makes a CA and a serving certificate, keeps them in a
//     Secret that every replica shares, makes its own
//     MutatingWebhookConfiguration trust the CA, serves the certificate
//     from memory, and renews both when two thirds of their validity have
//     passed.
//   - Files, with cert-manager: it serves the certificate and key another
//     issuer keeps in files (cert-manager's Secret, mounted by the kubelet;
//     cert-manager's CA injector sets the caBundle) and loads them again
//     when they change. It writes nothing.
//
// A Rotator's renewal makes a new CA; the bundle the webhook configuration
// trusts keeps the previous CA until it expires, so a replica that still
// serves the previous certificate (until its next Sync) is trusted all
// along. A replica serves a certificate only once the webhook
// configuration trusts its CA.
//
// github.com/open-policy-agent/cert-controller does most of Rotator's job
// too, but it serves the certificate from the Secret's volume, so the
// kubelet's sync delay stands between a CA rotation (after which only the
// new CA is trusted) and the server's new certificate: admissions fail
// meanwhile, and with failurePolicy Ignore pods start without the sidecar.
// It also needs a manager with informers, so it cannot be tested without an
// API server. Rotator needs get and update on one Secret and one
// MutatingWebhookConfiguration, nothing else. Files has the same volume
// delay; the chart avoids the failure it causes by keeping the key of
// cert-manager's CA across renewals, so that the bundle trusts the
// previous and the next serving certificate alike.
package certs
