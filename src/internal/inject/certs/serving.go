package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// errNoCertificate is GetCertificate's and Ready's error before a source
// has loaded its first certificate.
var errNoCertificate = errors.New("no webhook certificate yet")

// serving is the certificate a source serves, swapped whole when the
// source loads another: Rotator and Files embed it for their
// GetCertificate and Ready.
type serving struct {
	now  func() time.Time                // the clock of Ready; written once by the constructor
	cert atomic.Pointer[tls.Certificate] // nil until the first load; its Leaf is set
}

// GetCertificate returns the certificate served, for tls.Config.
func (s *serving) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.cert.Load(); c != nil {
		return c, nil
	}
	return nil, errNoCertificate
}

// Ready returns nil when a certificate is served and valid now: the
// injector's readiness.
func (s *serving) Ready() error {
	c := s.cert.Load()
	if c == nil {
		return errNoCertificate
	}
	if now := s.now(); now.After(c.Leaf.NotAfter) || now.Before(c.Leaf.NotBefore) {
		return fmt.Errorf("webhook certificate valid from %s to %s, not now", c.Leaf.NotBefore, c.Leaf.NotAfter)
	}
	return nil
}

// every calls f at once and then every interval until ctx ends; an error
// of f is logged as what failed, and f is called again at the next tick.
func every(ctx context.Context, interval time.Duration, logger *slog.Logger, what string, f func(context.Context) error) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := f(ctx); err != nil && ctx.Err() == nil {
			logger.Error(what+" failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
