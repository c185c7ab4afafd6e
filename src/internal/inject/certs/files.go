package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FilesOptions say where a Files source finds its certificate and what it
// must be valid for.
type FilesOptions struct {
	Dir      string           // holds KeyCert and KeyKey, as the volume of a kubernetes.io/tls Secret does
	DNSNames []string         // the Service's names the API server calls: the certificate must be valid for each
	Now      func() time.Time // the clock of Ready; nil: time.Now
}

// Files serves a certificate that another issuer keeps in files, such as
// cert-manager's Secret mounted by the kubelet, and loads it again when the
// files change.
//
// Run reads the files every interval and compares their contents with what
// it served last, rather than check them on each TLS handshake: the issuer
// renews long before expiry (cert-manager at two thirds of the validity by
// default), so a minute's delay costs nothing, while a handshake that
// reads files would put file system errors and a half-swapped volume on
// the API server's path. GetCertificate stays one atomic load. Contents
// are compared rather than modification times: two small reads a minute
// cost nothing, and the comparison does not depend on how the writer
// replaces the files (the kubelet swaps a symbolic link to a new
// directory) or on the resolution of their times.
type Files struct {
	serving
	opts   FilesOptions
	logger *slog.Logger

	mu                    sync.Mutex // guards the contents below; held by Load
	loadedCert, loadedKey []byte     // the files' contents served now
}

// NewFiles returns a source of the certificate in opts.Dir; it serves
// nothing until Load, or Run, has read a valid one.
func NewFiles(opts FilesOptions, logger *slog.Logger) (*Files, error) {
	if opts.Dir == "" || len(opts.DNSNames) == 0 {
		return nil, fmt.Errorf("a certificate from files needs their directory and the DNS names it is for: %+v", opts)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Files{serving: serving{now: opts.Now}, opts: opts, logger: logger}, nil
}

// Run loads the certificate at once and then every interval until ctx
// ends; a failed load is logged, and the certificate served before stays.
func (f *Files) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, f.logger, "certificate load", func(context.Context) error { return f.Load() })
}

// Load reads the certificate and its key, and when either differs from
// what is served, serves them instead. A pair that does not load (a file
// missing or half written, a key of another certificate, a certificate not
// valid for every DNS name) is an error, and what was served stays served.
func (f *Files) Load() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	cert, err := os.ReadFile(filepath.Join(f.opts.Dir, KeyCert))
	if err != nil {
		return fmt.Errorf("read webhook certificate: %w", err)
	}
	key, err := os.ReadFile(filepath.Join(f.opts.Dir, KeyKey))
	if err != nil {
		return fmt.Errorf("read webhook certificate key: %w", err)
	}
	if bytes.Equal(cert, f.loadedCert) && bytes.Equal(key, f.loadedKey) {
		return nil
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return fmt.Errorf("load webhook certificate from %s: %w", f.opts.Dir, err)
	}
	for _, name := range f.opts.DNSNames {
		if err := pair.Leaf.VerifyHostname(name); err != nil {
			return fmt.Errorf("webhook certificate in %s: %w", f.opts.Dir, err)
		}
	}
	f.cert.Store(&pair)
	f.loadedCert, f.loadedKey = cert, key
	f.logger.Info("webhook certificate loaded", "dir", f.opts.Dir, "serial", pair.Leaf.SerialNumber.String(), "valid_until", pair.Leaf.NotAfter)
	return nil
}
