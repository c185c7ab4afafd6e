package sidecar

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/tlsfiles"
)

// legs are the transports of the callers' leg and the backend leg: TLS
// from files the sidecar reads again when they change, or plain text. The
// leg between replicas is the fleet's (package fleet).
type legs struct {
	callers []grpc.ServerOption // the callers' listener's; none: plain text
	backend grpc.DialOption
	sources []*tlsfiles.Source // watched until close
}

// openLegs reads the TLS files cfg names.
func openLegs(cfg config.Settings) (*legs, error) {
	l := &legs{backend: grpc.WithTransportCredentials(insecure.NewCredentials())}
	if cfg.TLSCertFile != "" {
		src, err := l.watch(tlsfiles.Files{Cert: cfg.TLSCertFile, Key: cfg.TLSKeyFile, CA: cfg.TLSClientCAFile}, "tls-cert-file")
		if err != nil {
			return nil, err
		}
		creds, err := src.Server()
		if err != nil {
			l.close()
			return nil, fmt.Errorf("callers' TLS (%s): %w", config.EnvName("tls-cert-file"), err)
		}
		l.callers = []grpc.ServerOption{grpc.Creds(creds)}
	}
	if cfg.BackendTLS {
		src, err := l.watch(tlsfiles.Files{Cert: cfg.BackendTLSCertFile, Key: cfg.BackendTLSKeyFile, CA: cfg.BackendTLSCAFile}, "backend-tls")
		if err != nil {
			return nil, err
		}
		l.backend = grpc.WithTransportCredentials(src.Client(cfg.BackendTLSServerName))
	}
	return l, nil
}

// watch watches f, named by flag in errors, until close.
func (l *legs) watch(f tlsfiles.Files, flag string) (*tlsfiles.Source, error) {
	src, err := tlsfiles.Watch(f, 0)
	if err != nil {
		l.close()
		return nil, fmt.Errorf("TLS (%s): %w", config.EnvName(flag), err)
	}
	l.sources = append(l.sources, src)
	return src, nil
}

// close stops watching the files.
func (l *legs) close() {
	for _, src := range l.sources {
		src.Close()
	}
}
