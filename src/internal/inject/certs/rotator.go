package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/collapser/collapser/src/internal/pki"
)

// The keys of the Secret.
const (
	// KeyCA holds the CAs the webhook configuration trusts, in PEM: the
	// current one first, then earlier ones until they expire.
	KeyCA    = "ca.crt"
	KeyCAKey = "ca.key"
	KeyCert  = corev1.TLSCertKey
	KeyKey   = corev1.TLSPrivateKeyKey
)

// Defaults of the certificates' validity and of how often Run syncs.
const (
	DefaultValidity      = 365 * 24 * time.Hour
	DefaultCheckInterval = time.Minute
)

// Options say where a Rotator keeps its certificate and what it is for.
type Options struct {
	Secret   types.NamespacedName // the Secret shared by every replica
	Webhook  string               // the MutatingWebhookConfiguration whose caBundle is set
	DNSNames []string             // the Service's names the API server calls, the first one first
	Validity time.Duration        // of each CA and serving certificate
	Now      func() time.Time     // the clock; nil: time.Now
}

// Rotator keeps the serving certificate: Sync, or Run, renews it and makes
// it trusted; GetCertificate serves it.
type Rotator struct {
	serving
	opts   Options
	client client.Client
	logger *slog.Logger
}

// New returns a Rotator that reads and writes the Secret and the webhook
// configuration through c.
func New(c client.Client, opts Options, logger *slog.Logger) (*Rotator, error) {
	if opts.Secret.Name == "" || opts.Secret.Namespace == "" || opts.Webhook == "" || len(opts.DNSNames) == 0 || opts.Validity <= 0 {
		return nil, fmt.Errorf("certificates need a Secret with its namespace, a webhook configuration, DNS names and a positive validity: %+v", opts)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Rotator{serving: serving{now: opts.Now}, opts: opts, client: c, logger: logger}, nil
}

// Run syncs at once and then every interval until ctx ends; a failed Sync
// is logged and tried again at the next.
func (r *Rotator) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, r.logger, "certificate sync", r.Sync)
}

// Sync renews the Secret's certificate if it is missing, invalid or due,
// makes the webhook configuration trust its CA, and serves it. When
// another replica renewed it first, Sync serves that one.
func (r *Rotator) Sync(ctx context.Context) error {
	var secret corev1.Secret
	for attempt := 0; ; attempt++ {
		if err := r.client.Get(ctx, r.opts.Secret, &secret); err != nil {
			return fmt.Errorf("read secret %s: %w", r.opts.Secret, err)
		}
		now := r.opts.Now()
		if r.valid(secret.Data, now) {
			break
		}
		err := r.renew(ctx, &secret, now)
		if err == nil {
			break
		}
		if !apierrors.IsConflict(err) || attempt > 0 {
			return err
		}
	}
	if err := r.trust(ctx, secret.Data[KeyCA]); err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(secret.Data[KeyCert], secret.Data[KeyKey])
	if err != nil {
		return fmt.Errorf("load certificate of secret %s: %w", r.opts.Secret, err)
	}
	r.cert.Store(&pair)
	return nil
}

// valid reports whether data holds a serving certificate for every DNS
// name, signed by its CA, and not yet due for renewal at now.
func (r *Rotator) valid(data map[string][]byte, now time.Time) bool {
	pair, err := tls.X509KeyPair(data[KeyCert], data[KeyKey])
	if err != nil {
		return false
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[KeyCA]) {
		return false
	}
	for _, name := range r.opts.DNSNames {
		if _, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: now}); err != nil {
			return false
		}
	}
	return now.Before(renewAt(pair.Leaf.NotBefore, pair.Leaf.NotAfter))
}

// renewAt is when two thirds of the validity of a certificate valid from
// notBefore to notAfter, from its issue, have passed.
func renewAt(notBefore, notAfter time.Time) time.Time {
	issued := notBefore.Add(clockSkew)
	return issued.Add(notAfter.Sub(issued) * 2 / 3)
}

// renew writes a new CA and serving certificate into secret, keeping the
// CAs of its bundle that have not expired.
func (r *Rotator) renew(ctx context.Context, secret *corev1.Secret, now time.Time) error {
	iss, err := issue(r.opts.DNSNames, now, r.opts.Validity)
	if err != nil {
		return err
	}
	bundle := iss.caCert
	for _, ca := range pki.ParseCerts(secret.Data[KeyCA]) {
		if now.Before(ca.NotAfter) {
			bundle = append(bundle, pki.CertPEM(ca)...)
		}
	}
	secret.Data = map[string][]byte{KeyCA: bundle, KeyCAKey: iss.caKey, KeyCert: iss.cert, KeyKey: iss.key}
	if err := r.client.Update(ctx, secret); err != nil {
		return fmt.Errorf("write renewed certificate to secret %s: %w", r.opts.Secret, err)
	}
	r.logger.Info("webhook certificate renewed", "secret", r.opts.Secret.String(), "valid_until", now.Add(r.opts.Validity))
	return nil
}

// trust sets bundle as the caBundle of every webhook of the configuration.
// Every replica does it at start: when another one's write comes between
// this one's read and write, it reads again (client-go's RetryOnConflict)
// rather than wait for the next sync with its certificate unserved.
func (r *Rotator) trust(ctx context.Context, bundle []byte) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := r.client.Get(ctx, client.ObjectKey{Name: r.opts.Webhook}, &cfg); err != nil {
			return fmt.Errorf("read mutating webhook configuration %s: %w", r.opts.Webhook, err)
		}
		changed := false
		for i := range cfg.Webhooks {
			if cc := &cfg.Webhooks[i].ClientConfig; !bytes.Equal(cc.CABundle, bundle) {
				cc.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if err := r.client.Update(ctx, &cfg); err != nil {
			return fmt.Errorf("set caBundle of mutating webhook configuration %s: %w", r.opts.Webhook, err)
		}
		return nil
	})
}
