package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/inject/certs"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestParseSettings(t *testing.T) {
	ns := map[string]string{"COLLAPSER_INJECTOR_NAMESPACE": "collapser"}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(settings) bool
		wantErr string
	}{
		{"defaults", nil, ns, func(s settings) bool {
			return s.SidecarMode == modeAuto && s.CertValidity == certs.DefaultValidity && s.CertCheck == certs.DefaultCheckInterval && s.Namespace == "collapser"
		}, ""},
		{"flag over variable", []string{"--sidecar-mode=container"}, map[string]string{"COLLAPSER_INJECTOR_NAMESPACE": "x", "COLLAPSER_INJECTOR_SIDECAR_MODE": "native"},
			func(s settings) bool { return s.SidecarMode == modeContainer }, ""},
		{"short validity", []string{"--cert-validity=3m", "--cert-check-interval=10s"}, ns,
			func(s settings) bool { return s.CertValidity == 3*time.Minute && s.CertCheck == 10*time.Second }, ""},
		{"certificate files", []string{"--cert-dir=/etc/tls", "--secret=", "--webhook-config="}, ns,
			func(s settings) bool { return s.CertDir == "/etc/tls" && s.CertCheck == certs.DefaultCheckInterval }, ""},
		{"certificate files read again every hour", []string{"--cert-dir=/etc/tls", "--cert-validity=1h", "--cert-check-interval=1h", "--peer-ca-secret="}, ns,
			func(s settings) bool { return s.CertCheck == time.Hour }, ""},
		{"peer certificates by default", nil, ns, func(s settings) bool {
			return s.PeerCASecret == "collapser-injector-peer-ca" && s.PeerCertValidity == certs.DefaultPeerCertValidity && s.PeerCAValidity == certs.DefaultPeerCAValidity
		}, ""},
		{"checks too rare for a new peer CA", []string{"--cert-dir=/etc/tls", "--cert-check-interval=1h"}, ns, nil,
			"--cert-check-interval (COLLAPSER_INJECTOR_CERT_CHECK_INTERVAL): must be positive and at most 15m0s with --peer-ca-secret"},
		{"peer CA too short", []string{"--peer-cert-validity=720h", "--peer-ca-validity=1000h"}, ns, nil,
			"--peer-ca-validity (COLLAPSER_INJECTOR_PEER_CA_VALIDITY): must be at least three times --peer-cert-validity and an hour"},
		{"no secret of its own", []string{"--secret="}, ns, nil, "--secret (COLLAPSER_INJECTOR_SECRET): must be set without --cert-dir"},
		{"no namespace", nil, nil, nil, "--namespace (COLLAPSER_INJECTOR_NAMESPACE): must be set"},
		{"bad mode", []string{"--sidecar-mode=sidecar"}, ns, nil, `--sidecar-mode (COLLAPSER_INJECTOR_SIDECAR_MODE): must be auto, native or container, got "sidecar"`},
		{"check too slow to renew", []string{"--cert-validity=1h", "--cert-check-interval=20m"}, ns, nil, "--cert-check-interval (COLLAPSER_INJECTOR_CERT_CHECK_INTERVAL): must be positive and under a third of --cert-validity"},
		{"bad address", []string{"--listen=8443"}, ns, nil, `--listen (COLLAPSER_INJECTOR_LISTEN): "8443" is not host:port`},
		{"bad log format", []string{"--log-format=xml"}, ns, nil, `invalid value "xml" for flag -log-format: want json or text`},
		{"bad variable", nil, map[string]string{"COLLAPSER_INJECTOR_CERT_VALIDITY": "long"}, nil, `COLLAPSER_INJECTOR_CERT_VALIDITY="long"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseSettings(tt.args, testkit.Env(tt.env), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(s) {
				t.Errorf("settings %+v, %v", s, err)
			}
		})
	}
	if _, err := parseSettings([]string{"-h"}, testkit.Env(ns), io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: err = %v, want flag.ErrHelp", err)
	}
}
