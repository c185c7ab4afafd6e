package certs

import (
	"cmp"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/collapser/collapser/src/internal/pki"
)

// KeyIssued is the key of the peer CA's Secret that lists, in JSON, the
// workload Secrets Peers wrote and keeps renewed.
const KeyIssued = "issued.json"

// The label every workload Secret Peers writes carries: Peers renews or
// takes over only a Secret that carries it.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "collapser-injector"
)

// Defaults of the peer certificates' validity.
const (
	DefaultPeerCertValidity = 30 * 24 * time.Hour
	DefaultPeerCAValidity   = 5 * 365 * 24 * time.Hour
)

// PeerRequest asks for the peer certificate the replicas of one workload
// share: those whose peers are the headless Service Service in Namespace,
// kept in the Secret Secret there.
type PeerRequest struct {
	Namespace, Service, Secret string
}

// PeersOptions say where Peers keeps its CA and what it issues.
type PeersOptions struct {
	CASecret     types.NamespacedName // the CA's Secret, shared by every replica of the injector
	TrustDomain  string               // of the identities: spiffe://<TrustDomain>/ns/<namespace>/collapser/<service>
	CAValidity   time.Duration        // of each CA; a new one is made when two thirds have passed
	CertValidity time.Duration        // of each workload certificate; renewed when two thirds have passed
	// TrustLead is how long a new CA is trusted (written into every workload
	// Secret's ca.crt) before it signs anything: long enough for every
	// workload's Secret to be renewed and reach its pods' volumes.
	TrustLead time.Duration
	Now       func() time.Time // the clock; nil: time.Now
}

// Peers issues the peer certificates of injected workloads: each one's
// replicas share a certificate with a SPIFFE ID of their namespace and
// peers Service, signed by a CA of the injector's, in a Secret of the
// workload's namespace. Ensure writes it when a pod is admitted; Sync, or
// Run, renews the CA and every certificate that is due.
//
// Peers reads no workload Secret: it creates them and patches those that
// carry its label, and keeps the list of what it wrote in the CA's Secret
// (KeyIssued), so it needs create and patch on Secrets, and get and update
// on its CA's Secret only.
type Peers struct {
	opts   PeersOptions
	client client.Client
	logger *slog.Logger

	mu    sync.Mutex
	state *peerState // nil until the first Sync; replaced whole
}

// peerState is the CA as the last Sync or Ensure read it.
type peerState struct {
	bundle []byte      // the trusted CAs in PEM, newest first
	signer pki.KeyPair // the CA that signs
	issued issuedList
}

// issuedCert is what Peers last wrote into one workload Secret.
type issuedCert struct {
	Namespace string    `json:"namespace"`
	Secret    string    `json:"secret"`
	Service   string    `json:"service"`
	NotBefore time.Time `json:"notBefore"`
	NotAfter  time.Time `json:"notAfter"`
	Signer    string    `json:"signer"` // the signing CA's serial number, hex
	Bundle    string    `json:"bundle"` // sha256 of the ca.crt written, hex
}

// issuedList is the workload Secrets written, by namespace/name.
type issuedList map[string]issuedCert

// NewPeers returns a Peers that keeps its CA through c.
func NewPeers(c client.Client, opts PeersOptions, logger *slog.Logger) (*Peers, error) {
	if opts.CASecret.Name == "" || opts.CASecret.Namespace == "" || opts.TrustDomain == "" {
		return nil, fmt.Errorf("peer certificates need a CA Secret with its namespace and a trust domain: %+v", opts)
	}
	if opts.CertValidity <= 0 || opts.TrustLead <= 0 || opts.CAValidity < 3*(opts.CertValidity+opts.TrustLead) {
		return nil, fmt.Errorf("peer certificates need a positive validity and trust lead, and a CA valid at least three times as long as both (%v, %v, CA %v)",
			opts.CertValidity, opts.TrustLead, opts.CAValidity)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Peers{opts: opts, client: c, logger: logger}, nil
}

// Identity is the SPIFFE ID the replicas of req's workload share.
func (p *Peers) Identity(req PeerRequest) *url.URL {
	return &url.URL{Scheme: "spiffe", Host: p.opts.TrustDomain, Path: fmt.Sprintf("/ns/%s/collapser/%s", req.Namespace, req.Service)}
}

// Run syncs at once and then every interval until ctx ends; a failed Sync
// is logged and tried again at the next.
func (p *Peers) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, p.logger, "peer certificate sync", p.Sync)
}

// Ready returns nil once the CA is loaded: Ensure can issue.
func (p *Peers) Ready() error {
	if p.current() == nil {
		return errors.New("no peer CA yet")
	}
	return nil
}

func (p *Peers) current() *peerState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Ensure makes sure req's Secret holds a certificate for its workload: it
// creates the Secret, or, when it exists and Peers does not list it yet,
// writes it if it carries Peers' label (another replica of the injector
// made it). A Secret of the name that Peers did not make is an error that
// names it.
func (p *Peers) Ensure(ctx context.Context, req PeerRequest) error {
	st := p.current()
	if st == nil {
		return errors.New("issue peer certificate: no peer CA yet")
	}
	secret, entry, err := p.issue(st, req, p.opts.Now())
	if err != nil {
		return err
	}
	err = p.client.Create(ctx, secret)
	switch {
	case apierrors.IsAlreadyExists(err):
		if _, listed := st.issued[entry.key()]; listed {
			return nil // Sync keeps it renewed
		}
		if err := p.patch(ctx, secret); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("create peer certificate secret %s/%s: %w", req.Namespace, req.Secret, err)
	}
	return p.record(ctx, func(issued issuedList) { issued[entry.key()] = entry })
}

// issue signs a certificate for req's workload with st's signer and
// returns the Secret that holds it and what Peers lists of it.
func (p *Peers) issue(st *peerState, req PeerRequest, now time.Time) (*corev1.Secret, issuedCert, error) {
	id := p.Identity(req)
	valid := pki.Window{NotBefore: now.Add(-clockSkew), NotAfter: now.Add(p.opts.CertValidity)}
	if st.signer.Cert.NotAfter.Before(valid.NotAfter) {
		valid.NotAfter = st.signer.Cert.NotAfter
	}
	leaf, err := pki.Issue(st.signer, pki.Leaf{
		Name:   id.String(),
		URIs:   []*url.URL{id},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		Valid:  valid,
	})
	if err != nil {
		return nil, issuedCert{}, fmt.Errorf("issue peer certificate %s: %w", id, err)
	}
	cert, key, err := leaf.PEM()
	if err != nil {
		return nil, issuedCert{}, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: req.Namespace,
			Name:      req.Secret,
			Labels:    map[string]string{LabelManagedBy: ManagedBy},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, corev1.ServiceAccountRootCAKey: st.bundle},
	}
	return secret, issuedCert{
		Namespace: req.Namespace, Secret: req.Secret, Service: req.Service,
		NotBefore: valid.NotBefore, NotAfter: valid.NotAfter,
		Signer: caSerial(st.signer.Cert), Bundle: digest(st.bundle),
	}, nil
}

// patch writes secret's data over the Secret of its name, if that one
// carries Peers' label (a JSON patch test, so that no read is needed).
func (p *Peers) patch(ctx context.Context, secret *corev1.Secret) error {
	ops, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/labels/" + jsonPointerEscape(LabelManagedBy), "value": ManagedBy},
		{"op": "replace", "path": "/data", "value": secret.Data},
	})
	if err != nil {
		return fmt.Errorf("encode patch of secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	if err := p.client.Patch(ctx, secret.DeepCopy(), client.RawPatch(types.JSONPatchType, ops)); err != nil {
		if apierrors.IsInvalid(err) {
			return fmt.Errorf("secret %s/%s exists and is not the injector's (no label %s=%s): delete it, or name a Secret of yours with collapser.io/peer-tls-secret: %w",
				secret.Namespace, secret.Name, LabelManagedBy, ManagedBy, err)
		}
		return fmt.Errorf("write peer certificate to secret %s/%s: %w", secret.Namespace, secret.Name, err)
	}
	return nil
}

// Sync renews the CA when two thirds of its validity have passed (the new
// one is trusted at once and signs after TrustLead), drops expired CAs,
// and renews every workload certificate that is due, signed by another CA
// than the one that signs now, or written with another ca.crt. When
// another replica wrote the CA between its read and its write (both start
// together on install), it reads again at once rather than stay unready
// until the next Sync.
func (p *Peers) Sync(ctx context.Context) error {
	err := p.sync(ctx)
	if apierrors.IsConflict(err) {
		err = p.sync(ctx)
	}
	return err
}

func (p *Peers) sync(ctx context.Context) error {
	var secret corev1.Secret
	if err := p.client.Get(ctx, p.opts.CASecret, &secret); err != nil {
		return fmt.Errorf("read peer CA secret %s: %w", p.opts.CASecret, err)
	}
	now := p.opts.Now()
	cas, err := parseCAs(secret.Data)
	if err != nil {
		return fmt.Errorf("peer CA secret %s: %w", p.opts.CASecret, err)
	}
	kept, err := p.keepCAs(cas, now)
	if err != nil {
		return err
	}
	if len(kept) != len(cas) || !kept[0].Cert.Equal(cas[0].Cert) {
		if secret.Data, err = withCAs(secret.Data, kept); err != nil {
			return err
		}
		if err := p.client.Update(ctx, &secret); err != nil {
			return fmt.Errorf("write peer CA to secret %s: %w", p.opts.CASecret, err)
		}
		p.logger.Info("peer CA renewed", "secret", p.opts.CASecret.String(), "trusted", len(kept))
		cas = kept
	}
	issued, err := parseIssued(secret.Data[KeyIssued])
	if err != nil {
		return fmt.Errorf("peer CA secret %s: %w", p.opts.CASecret, err)
	}
	st := &peerState{bundle: secret.Data[KeyCA], signer: signerAt(cas, now, p.opts.TrustLead), issued: issued}
	p.setState(st)
	return p.renewDue(ctx, st, now)
}

// renewDue renews st's workload certificates that are due, and lists what
// it wrote; a Secret gone, or no longer the injector's, leaves the list.
func (p *Peers) renewDue(ctx context.Context, st *peerState, now time.Time) error {
	renewed, dropped := issuedList{}, []string{}
	signer, bundle := caSerial(st.signer.Cert), digest(st.bundle)
	var errs []error
	for key, e := range st.issued {
		if now.Before(renewAt(e.NotBefore, e.NotAfter)) && e.Signer == signer && e.Bundle == bundle {
			continue
		}
		secret, entry, err := p.issue(st, PeerRequest{Namespace: e.Namespace, Service: e.Service, Secret: e.Secret}, now)
		if err == nil {
			err = p.patch(ctx, secret)
		}
		switch {
		case err == nil:
			renewed[key] = entry
		case apierrors.IsNotFound(err) || apierrors.IsInvalid(err):
			p.logger.Warn("peer certificate secret no longer renewed", "secret", key, "err", err)
			dropped = append(dropped, key)
		default:
			errs = append(errs, err)
		}
	}
	if len(renewed)+len(dropped) > 0 {
		errs = append(errs, p.record(ctx, func(issued issuedList) {
			maps.Copy(issued, renewed)
			for _, key := range dropped {
				delete(issued, key)
			}
		}))
		p.logger.Info("peer certificates renewed", "renewed", len(renewed), "dropped", len(dropped))
	}
	return errors.Join(errs...)
}

// record edits the list of issued certificates in the CA's Secret, reading
// it again when another replica wrote it between read and write.
func (p *Peers) record(ctx context.Context, edit func(issuedList)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var secret corev1.Secret
		if err := p.client.Get(ctx, p.opts.CASecret, &secret); err != nil {
			return fmt.Errorf("read peer CA secret %s: %w", p.opts.CASecret, err)
		}
		issued, err := parseIssued(secret.Data[KeyIssued])
		if err != nil {
			return fmt.Errorf("peer CA secret %s: %w", p.opts.CASecret, err)
		}
		edit(issued)
		data, err := json.Marshal(slices.SortedFunc(maps.Values(issued), func(a, b issuedCert) int {
			return cmp.Compare(a.key(), b.key())
		}))
		if err != nil {
			return fmt.Errorf("encode issued peer certificates: %w", err)
		}
		secret.Data[KeyIssued] = data
		if err := p.client.Update(ctx, &secret); err != nil {
			return fmt.Errorf("list issued peer certificates in secret %s: %w", p.opts.CASecret, err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.state != nil {
			p.state = &peerState{bundle: p.state.bundle, signer: p.state.signer, issued: issued}
		}
		return nil
	})
}

func (p *Peers) setState(st *peerState) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state = st
}

// keepCAs returns the CAs to trust at now, newest first: cas without the
// expired ones, and a new one first when there is none or the newest has
// passed two thirds of its validity.
func (p *Peers) keepCAs(cas []pki.KeyPair, now time.Time) ([]pki.KeyPair, error) {
	kept := slices.DeleteFunc(slices.Clone(cas), func(ca pki.KeyPair) bool { return !now.Before(ca.Cert.NotAfter) })
	if len(kept) > 0 && now.Before(renewAt(kept[0].Cert.NotBefore, kept[0].Cert.NotAfter)) {
		return kept, nil
	}
	ca, err := pki.NewCA("collapser-injector peer CA "+now.UTC().Format(time.RFC3339),
		pki.Window{NotBefore: now.Add(-clockSkew), NotAfter: now.Add(p.opts.CAValidity)})
	if err != nil {
		return nil, fmt.Errorf("make peer CA: %w", err)
	}
	return append([]pki.KeyPair{ca}, kept...), nil
}

// signerAt is the CA that signs at now: the newest one trusted for at
// least lead, or, when none has been, the oldest.
func signerAt(cas []pki.KeyPair, now time.Time, lead time.Duration) pki.KeyPair {
	for _, ca := range cas {
		if !now.Before(ca.Cert.NotBefore.Add(clockSkew + lead)) {
			return ca
		}
	}
	return cas[len(cas)-1]
}

// parseCAs reads the CAs of the Secret's data, newest first: the
// certificates of KeyCA, each with its key, in the same order, in KeyCAKey.
func parseCAs(data map[string][]byte) ([]pki.KeyPair, error) {
	certs := pki.ParseCerts(data[KeyCA])
	var keys [][]byte
	for rest := data[KeyCAKey]; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		keys = append(keys, pem.EncodeToMemory(block))
	}
	if len(certs) != len(keys) {
		return nil, fmt.Errorf("%s holds %d certificates and %s %d keys", KeyCA, len(certs), KeyCAKey, len(keys))
	}
	cas := make([]pki.KeyPair, len(certs))
	for i, c := range certs {
		pair, err := tls.X509KeyPair(pki.CertPEM(c), keys[i])
		if err != nil {
			return nil, fmt.Errorf("CA %q: %w", c.Subject.CommonName, err)
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("CA %q: key is %T, not ECDSA", c.Subject.CommonName, pair.PrivateKey)
		}
		cas[i] = pki.KeyPair{Cert: c, Key: key}
	}
	return cas, nil
}

// withCAs returns data with cas as its CAs.
func withCAs(data map[string][]byte, cas []pki.KeyPair) (map[string][]byte, error) {
	out := maps.Clone(data)
	if out == nil {
		out = map[string][]byte{}
	}
	var bundle, keys []byte
	for _, ca := range cas {
		cert, key, err := ca.PEM()
		if err != nil {
			return nil, err
		}
		bundle, keys = append(bundle, cert...), append(keys, key...)
	}
	out[KeyCA], out[KeyCAKey] = bundle, keys
	return out, nil
}

// parseIssued reads KeyIssued's list; none is an empty list.
func parseIssued(data []byte) (issuedList, error) {
	issued := issuedList{}
	if len(data) == 0 {
		return issued, nil
	}
	var list []issuedCert
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("read %s: %w", KeyIssued, err)
	}
	for _, e := range list {
		issued[e.key()] = e
	}
	return issued, nil
}

func (e issuedCert) key() string { return e.Namespace + "/" + e.Secret }

func caSerial(c *x509.Certificate) string { return c.SerialNumber.Text(16) }

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// jsonPointerEscape escapes a JSON pointer's token (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
