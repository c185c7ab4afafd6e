package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/collapser/collapser/src/internal/inject"
	"github.com/collapser/collapser/src/internal/inject/webhook"
)

// The paths the webhook configuration calls: WebhookPath for the pods that
// say themselves whether they want the sidecar (collapser.io/inject), and
// NamespaceWebhookPath for every pod of a namespace labelled
// collapser.io/inject=enabled, whose label it need not read.
const (
	WebhookPath          = "/inject"
	NamespaceWebhookPath = "/inject/namespace"
)

// readHeaderTimeout bounds how long a connection may take to send its
// request headers, on both servers.
const readHeaderTimeout = 10 * time.Second

// listeners are where the injector serves.
type listeners struct {
	webhook net.Listener // HTTPS: the admission webhook
	ops     net.Listener // HTTP: /metrics, /readyz, /livez
}

// serve injects in mode through the API server c, serving on lis until ctx
// ends, then lets admissions in flight finish within s.ShutdownTimeout.
func serve(ctx context.Context, s settings, c client.Client, mode inject.Mode, lis listeners, logger *slog.Logger) error {
	data, err := os.ReadFile(s.Template)
	if err != nil {
		return fmt.Errorf("read sidecar template: %w", err)
	}
	tmpl, err := inject.ParseTemplate(data)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Template, err)
	}
	certificate, err := newCertSource(s, c, logger)
	if err != nil {
		return err
	}
	peerCerts, err := newPeerCerts(s, tmpl.ClusterDomain, c, logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := webhook.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}

	mux := http.NewServeMux()
	injector := inject.Injector{Template: tmpl, Mode: mode}
	var issuer webhook.PeerIssuer // a nil *certs.Peers must stay a nil interface
	if peerCerts != nil {
		issuer = peerCerts
	}
	mux.Handle(WebhookPath, webhook.New(injector, c, issuer, metrics, logger))
	mux.Handle(NamespaceWebhookPath, webhook.New(injector, webhook.OptedIn, issuer, metrics, logger))
	webhookServer := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		TLSConfig:         &tls.Config{GetCertificate: certificate.GetCertificate, MinVersion: tls.VersionTLS12},
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ops := http.NewServeMux()
	ops.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ops.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		err := certificate.Ready()
		if err == nil && peerCerts != nil {
			err = peerCerts.Ready()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	ops.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	opsServer := &http.Server{Handler: ops, ReadHeaderTimeout: readHeaderTimeout}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	certifying, stopCertifying := context.WithCancel(ctx)
	defer stopCertifying()
	wg.Go(func() { certificate.Run(certifying, s.CertCheck) })
	if peerCerts != nil {
		wg.Go(func() { peerCerts.Run(certifying, s.CertCheck) })
	}
	wg.Go(func() { errs <- ignoreClosed(webhookServer.ServeTLS(lis.webhook, "", "")) })
	wg.Go(func() { errs <- ignoreClosed(opsServer.Serve(lis.ops)) })
	logger.Info("collapser-injector serving", "webhook", lis.webhook.Addr().String(), "ops", lis.ops.Addr().String(), "native_sidecar", mode == inject.Native, "cert_dir", s.CertDir)

	var served error
	select {
	case <-ctx.Done():
	case served = <-errs: // a server failed: stop the other
	}
	stopCertifying()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer cancel()
	err = errors.Join(served, webhookServer.Shutdown(shutdownCtx), opsServer.Shutdown(shutdownCtx))
	wg.Wait()
	return err
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
