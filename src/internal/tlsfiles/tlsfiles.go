// Package tlsfiles makes gRPC transport credentials from PEM files that a
// sidecar reads again when they change (a Secret volume the kubelet
// updates, cert-manager's renewals): grpc-go's pemfile certificate
// provider watches the files, and every handshake takes the material it
// holds then, so a renewed certificate is served without a restart and a
// connection already made keeps the one it was made with.
//
// Three legs use it: replicas between themselves (Mutual: both sides
// present a certificate of one identity and require it of the other), the
// callers' leg (Server) and the backend leg (Client).
package tlsfiles

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/tls/certprovider"
	"google.golang.org/grpc/credentials/tls/certprovider/pemfile"
)

// DefaultRefresh is how often the files are read again.
const DefaultRefresh = 10 * time.Second

// handshakeWait bounds how long a handshake waits for the provider's first
// reading of the files (Watch has read them once already).
const handshakeWait = 5 * time.Second

// Files names the PEM files of one side of a leg.
type Files struct {
	// Cert and Key are this side's certificate chain and private key, both
	// or neither; they must share a directory (one Secret volume), so that
	// a renewal is read whole.
	Cert, Key string
	// CA holds the certificates that verify the other side's; "" on a
	// client leg: the system's roots.
	CA string
}

// Source is a set of Files watched for changes. Close it when done.
type Source struct {
	files    Files
	leaf     *x509.Certificate // this side's certificate as Watch first read it; nil without one
	provider certprovider.Provider
}

// Watch reads f once, to refuse files that cannot be used with an error
// naming them, and then every refresh (0: DefaultRefresh). No files at all
// make a Source for Client alone: the system's roots, no certificate. A later reading
// that fails is logged by grpc-go and the last good material kept.
func Watch(f Files, refresh time.Duration) (*Source, error) {
	if f == (Files{}) {
		return &Source{}, nil // a client of the system's roots, presenting nothing
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tls: a certificate needs its key, and a key its certificate")
	}
	var leaf *x509.Certificate
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("tls: certificate %s with key %s: %w", f.Cert, f.Key, err)
		}
		leaf = pair.Leaf
	}
	if f.CA != "" {
		if _, err := readPool(f.CA); err != nil {
			return nil, err
		}
	}
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	p, err := pemfile.NewProvider(pemfile.Options{CertFile: f.Cert, KeyFile: f.Key, RootFile: f.CA, RefreshDuration: refresh})
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &Source{files: f, leaf: leaf, provider: p}, nil
}

// readPool reads a PEM file of CA certificates.
func readPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tls: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA %s holds no PEM certificate", path)
	}
	return pool, nil
}

// Close stops watching the files.
func (s *Source) Close() {
	if s.provider != nil {
		s.provider.Close()
	}
}

// material returns the certificates and roots the files hold now.
func (s *Source) material(ctx context.Context) (*certprovider.KeyMaterial, error) {
	if s.provider == nil {
		return &certprovider.KeyMaterial{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeWait)
	defer cancel()
	km, err := s.provider.KeyMaterial(ctx)
	if err != nil {
		return nil, fmt.Errorf("tls: read %s: %w", s.describe(), err)
	}
	return km, nil
}

// describe names the files for errors.
func (s *Source) describe() string {
	switch {
	case s.files.Cert != "" && s.files.CA != "":
		return s.files.Cert + " and " + s.files.CA
	case s.files.Cert != "":
		return s.files.Cert
	}
	return s.files.CA
}

// Server returns the credentials of the callers' leg: the listener
// presents the certificate; with a CA, every caller must present a
// certificate it signed (mutual TLS).
func (s *Source) Server() (credentials.TransportCredentials, error) {
	if s.files.Cert == "" {
		return nil, errors.New("tls: a listener needs a certificate and key")
	}
	return &creds{src: s, config: func(km *certprovider.KeyMaterial) *tls.Config {
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: km.Certs}
		if s.files.CA != "" {
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, km.Roots
		}
		return c
	}}, nil
}

// Client returns the credentials of the backend leg: the backend's
// certificate is verified against the CA (the system's roots without one)
// for serverName ("": the host the backend is dialed by), and this side's
// certificate, when it has one, presented when asked.
func (s *Source) Client(serverName string) credentials.TransportCredentials {
	return &creds{src: s, serverName: serverName, verified: serverName != "", config: func(km *certprovider.KeyMaterial) *tls.Config {
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: km.Certs}
		if s.files.CA != "" {
			c.RootCAs = km.Roots
		}
		return c
	}}
}

// creds are grpc-go's TLS credentials made anew for every handshake from
// the material the files hold then.
type creds struct {
	src *Source
	// config builds a handshake's configuration from the material.
	config func(km *certprovider.KeyMaterial) *tls.Config
	// serverName is the name a server's certificate is verified for; "":
	// the host dialed.
	serverName string
	// verified: the client verified the server for a name of its own
	// choosing (Mutual's identity, Client's serverName), so the authority
	// of each call, the callers' :authority passed on, is not checked
	// against the certificate again.
	verified bool
}

// ClientHandshake implements credentials.TransportCredentials.
func (c *creds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	km, err := c.src.material(ctx)
	if err != nil {
		return nil, nil, err
	}
	// grpc-go verifies the server for the authority it is given.
	conn, info, err := credentials.NewTLS(c.config(km)).ClientHandshake(ctx, cmp.Or(c.serverName, authority), raw)
	if tlsInfo, ok := info.(credentials.TLSInfo); ok && err == nil && c.verified {
		return conn, anyAuthority{tlsInfo}, nil
	}
	return conn, info, err
}

// anyAuthority is the TLS of a connection whose server was verified for a
// name of the client's choosing: a call may carry any :authority
// (credentials.AuthorityValidator).
type anyAuthority struct{ credentials.TLSInfo }

// ValidateAuthority implements credentials.AuthorityValidator.
func (anyAuthority) ValidateAuthority(string) error { return nil }

// ServerHandshake implements credentials.TransportCredentials.
func (c *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	km, err := c.src.material(context.Background())
	if err != nil {
		return nil, nil, err
	}
	return credentials.NewTLS(c.config(km)).ServerHandshake(raw)
}

// Info implements credentials.TransportCredentials.
func (c *creds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}

// Clone implements credentials.TransportCredentials.
func (c *creds) Clone() credentials.TransportCredentials {
	clone := *c
	return &clone
}

// OverrideServerName implements credentials.TransportCredentials
// (deprecated by grpc-go, which no longer calls it).
func (c *creds) OverrideServerName(string) error { return nil }
