package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/collapser/collapser/src/internal/command"
	"github.com/collapser/collapser/src/internal/envflag"
	"github.com/collapser/collapser/src/internal/inject/certs"
)

// envPrefix starts the name of every environment variable the injector reads.
const envPrefix = "COLLAPSER_INJECTOR_"

// The values of --sidecar-mode.
const (
	modeAuto      = "auto"
	modeNative    = "native"
	modeContainer = "container"
)

// settings are the injector's settings: flags over environment variables over defaults.
type settings struct {
	Listen           string        // HTTPS address of the webhook
	OpsListen        string        // HTTP address of /metrics, /readyz and /livez
	Template         string        // path of the sidecar template the chart renders
	SidecarMode      string        // auto, native or container
	Namespace        string        // the injector's namespace: its Secret's and Service's
	CertDir          string        // files of a certificate another issuer keeps; "": the injector's own CA
	Secret           string        // Secret holding the injector's own CA and certificate
	Service          string        // Service the API server calls
	WebhookConfig    string        // MutatingWebhookConfiguration whose caBundle the injector sets
	CertValidity     time.Duration // of each CA and serving certificate of its own
	CertCheck        time.Duration // how often the certificate is renewed or read again
	PeerCASecret     string        // Secret holding the CA of workloads' peer certificates; "": none issued
	PeerCertValidity time.Duration // of each workload's peer certificate
	PeerCAValidity   time.Duration // of each peer CA
	ShutdownTimeout  time.Duration
	LogLevel         slog.Level
	LogFormat        string // "json" or "text"
}

// parseSettings returns the settings given by args over the environment
// read through lookup, over the defaults. Usage goes to out.
func parseSettings(args []string, lookup envflag.Lookup, out io.Writer) (settings, error) {
	s := settings{
		Listen:           ":8443",
		OpsListen:        ":8080",
		Template:         "/etc/collapser-injector/sidecar.yaml",
		SidecarMode:      modeAuto,
		Secret:           "collapser-injector-tls",
		Service:          "collapser-injector",
		WebhookConfig:    "collapser-injector",
		CertValidity:     certs.DefaultValidity,
		CertCheck:        certs.DefaultCheckInterval,
		PeerCASecret:     "collapser-injector-peer-ca",
		PeerCertValidity: certs.DefaultPeerCertValidity,
		PeerCAValidity:   certs.DefaultPeerCAValidity,
		ShutdownTimeout:  15 * time.Second,
		LogLevel:         slog.LevelInfo,
		LogFormat:        command.LogJSON,
	}
	fs := flag.NewFlagSet("collapser-injector", flag.ContinueOnError)
	fs.Usage = envflag.Usage(fs, envPrefix, "sidecar-mode")
	fs.StringVar(&s.Listen, "listen", s.Listen, "HTTPS `address` of the admission webhook")
	fs.StringVar(&s.OpsListen, "ops-listen", s.OpsListen, "HTTP `address` of /metrics, /readyz (serving a valid certificate) and /livez")
	fs.StringVar(&s.Template, "template", s.Template, "`path` of the sidecar template the chart renders (its ConfigMap), read at start")
	fs.StringVar(&s.SidecarMode, "sidecar-mode", s.SidecarMode, "how the sidecar is added: native (an init container that keeps running, Kubernetes 1.29+), container (an ordinary container), or auto (native if the API server is 1.29 or later)")
	fs.StringVar(&s.Namespace, "namespace", "", "the injector's `namespace`, where its Secret and Service are (the chart passes the pod's)")
	fs.StringVar(&s.CertDir, "cert-dir", s.CertDir, "`directory` of the tls.crt and tls.key another issuer keeps (cert-manager's Secret, mounted), served and read again every --cert-check-interval; the injector writes no Secret and no caBundle then. Empty: the injector makes, renews and trusts its own CA (--secret, --webhook-config, --cert-validity)")
	fs.StringVar(&s.Secret, "secret", s.Secret, "`name` of the Secret holding the injector's own CA and serving certificate")
	fs.StringVar(&s.Service, "service", s.Service, "`name` of the Service the API server calls: the certificate's DNS names")
	fs.StringVar(&s.WebhookConfig, "webhook-config", s.WebhookConfig, "`name` of the MutatingWebhookConfiguration whose caBundle the injector sets to its own CA")
	fs.DurationVar(&s.CertValidity, "cert-validity", s.CertValidity, "validity of each CA and serving certificate of the injector's own; renewed when two thirds have passed")
	fs.DurationVar(&s.CertCheck, "cert-check-interval", s.CertCheck, "how often the certificate is checked for renewal and another replica's renewal picked up, or, with --cert-dir, its files read again")
	fs.StringVar(&s.PeerCASecret, "peer-ca-secret", s.PeerCASecret, "`name` of the Secret, in the injector's namespace, holding the CA that signs the peer certificates the injector issues: a pod that names collapser.io/peers and no collapser.io/peer-tls-secret gets its workload's, in a Secret collapser-peer-tls-<peers> of its namespace, renewed every --cert-check-interval when due. Empty: none issued, and such a pod is refused")
	fs.DurationVar(&s.PeerCertValidity, "peer-cert-validity", s.PeerCertValidity, "validity of each workload's peer certificate; renewed when two thirds have passed")
	fs.DurationVar(&s.PeerCAValidity, "peer-ca-validity", s.PeerCAValidity, "validity of each peer CA; a new one is made when two thirds have passed, trusted at once and signing an hour later")
	fs.DurationVar(&s.ShutdownTimeout, "shutdown-timeout", s.ShutdownTimeout, "how long admissions in flight may take to finish after SIGTERM")
	command.LogFlags(fs, &s.LogLevel, &s.LogFormat)
	if err := envflag.Apply(fs, envPrefix, lookup); err != nil {
		return settings{}, err
	}
	if err := command.ParseFlags(fs, args, out, out); err != nil {
		return settings{}, err
	}
	return s, s.validate()
}

// validate checks what the flag types do not.
func (s settings) validate() error {
	var errs []error
	check := func(ok bool, flagName, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("--%s (%s): %s", flagName, envflag.Name(envPrefix, flagName), fmt.Sprintf(format, args...)))
		}
	}
	for _, a := range []struct{ flag, addr string }{{"listen", s.Listen}, {"ops-listen", s.OpsListen}} {
		_, _, err := net.SplitHostPort(a.addr)
		check(err == nil, a.flag, "%q is not host:port", a.addr)
	}
	check(s.SidecarMode == modeAuto || s.SidecarMode == modeNative || s.SidecarMode == modeContainer, "sidecar-mode", "must be auto, native or container, got %q", s.SidecarMode)
	check(s.Namespace != "", "namespace", "must be set")
	for _, n := range []struct{ flag, value string }{{"template", s.Template}, {"service", s.Service}} {
		check(n.value != "", n.flag, "must be set")
	}
	if s.CertDir != "" {
		check(s.CertCheck > 0, "cert-check-interval", "must be positive, got %v", s.CertCheck)
	} else {
		for _, n := range []struct{ flag, value string }{{"secret", s.Secret}, {"webhook-config", s.WebhookConfig}} {
			check(n.value != "", n.flag, "must be set without --cert-dir")
		}
		check(s.CertValidity > 0, "cert-validity", "must be positive, got %v", s.CertValidity)
		check(s.CertCheck > 0 && s.CertCheck < s.CertValidity/3, "cert-check-interval", "must be positive and under a third of --cert-validity (%v), so the renewal happens before expiry, got %v", s.CertValidity, s.CertCheck)
	}
	if s.PeerCASecret != "" {
		check(s.PeerCertValidity > 0, "peer-cert-validity", "must be positive, got %v", s.PeerCertValidity)
		check(s.PeerCAValidity >= 3*(s.PeerCertValidity+peerTrustLead), "peer-ca-validity", "must be at least three times --peer-cert-validity and an hour (%v), got %v", 3*(s.PeerCertValidity+peerTrustLead), s.PeerCAValidity)
		check(s.CertCheck > 0 && s.CertCheck <= peerTrustLead/4, "cert-check-interval", "must be positive and at most %v with --peer-ca-secret, so that a new peer CA reaches every workload before it signs, got %v", peerTrustLead/4, s.CertCheck)
	}
	check(s.ShutdownTimeout >= 0, "shutdown-timeout", "must not be negative, got %v", s.ShutdownTimeout)
	return errors.Join(errs...)
}

// peerTrustLead is how long a new peer CA is trusted before it signs: the
// next --cert-check-interval writes it into every workload's Secret, and
// the kubelet takes a minute or two to update the pods' volumes.
const peerTrustLead = time.Hour

// dnsNames are the names the API server may call the Service by.
func (s settings) dnsNames() []string {
	return []string{
		fmt.Sprintf("%s.%s.svc", s.Service, s.Namespace),
		fmt.Sprintf("%s.%s", s.Service, s.Namespace),
		s.Service,
	}
}
