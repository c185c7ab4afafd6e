package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	collapserconfig "github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestParseConfig_DefaultsEnvAndFlagsInThatOrder(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, nil, config{listen: ":50051", metricsListen: ":2113", latency: 50 * time.Millisecond, shutdownTimeout: 10 * time.Second, logLevel: slog.LevelWarn}},
		{"env", map[string]string{"HELLO_LISTEN": ":1", "HELLO_METRICS_LISTEN": ":2", "HELLO_LATENCY": "1s", "HELLO_STREAM_INTERVAL": "5ms", "HELLO_REPLY_BYTES": "1024", "HELLO_LOG_LEVEL": "debug"}, nil,
			config{listen: ":1", metricsListen: ":2", latency: time.Second, streamInterval: 5 * time.Millisecond, replyBytes: 1024, shutdownTimeout: 10 * time.Second, logLevel: slog.LevelDebug}},
		{"flags win", map[string]string{"HELLO_LISTEN": ":1", "HELLO_LATENCY": "1s"}, []string{"--listen", ":3", "--latency", "0", "--shutdown-timeout", "1s"},
			config{listen: ":3", metricsListen: ":2113", shutdownTimeout: time.Second, logLevel: slog.LevelWarn}},
	}
	for _, tt := range tests {
		got, err := parseConfig(tt.args, testkit.Env(tt.env), io.Discard, io.Discard)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parseConfig = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func TestParseConfig_CollapseReadsTheSidecarsSettings(t *testing.T) {
	env := map[string]string{"HELLO_COLLAPSE": "true", "COLLAPSER_CACHE_TTL": "2s", "COLLAPSER_POLICY_FILE": "/p.yaml",
		"COLLAPSER_PEERS": "dns:///hello-peers:50053", "COLLAPSER_PEER_TOKEN_FILE": "/token", "COLLAPSER_PEER_PLAINTEXT": "true"}
	got, err := parseConfig(nil, testkit.Env(env), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want, err := collapserconfig.Parse(nil, testkit.Env(env), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !got.collapse || !reflect.DeepEqual(got.collapser, want) || got.collapser.Policy.CacheTTL != 2*time.Second || got.collapser.Peers != "dns:///hello-peers:50053" {
		t.Errorf("parseConfig(--collapse) = %+v, want the sidecar's settings of the same variables", got)
	}
}

func TestParseConfig_BadValuesAreErrorsNamingTheirSource(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"bad env duration", map[string]string{"HELLO_LATENCY": "soon"}, nil, `HELLO_LATENCY="soon"`},
		{"bad env level", map[string]string{"HELLO_LOG_LEVEL": "loud"}, nil, `HELLO_LOG_LEVEL="loud"`},
		{"negative latency", nil, []string{"--latency", "-1s"}, "--latency (HELLO_LATENCY) must not be negative"},
		{"negative reply size", nil, []string{"--reply-bytes", "-1"}, "--reply-bytes (HELLO_REPLY_BYTES) must be in [0, 4193280], got -1"},
		{"reply over the message limit", map[string]string{"HELLO_REPLY_BYTES": "4194304"}, nil, "--reply-bytes (HELLO_REPLY_BYTES) must be in [0, 4193280], got 4194304"},
		{"a bad collapser setting", map[string]string{"HELLO_COLLAPSE": "true", "COLLAPSER_CACHE_TTL": "soon"}, nil, `--collapse (HELLO_COLLAPSE): the collapser's settings: COLLAPSER_CACHE_TTL="soon"`},
		{"peers without a token", map[string]string{"HELLO_COLLAPSE": "true", "COLLAPSER_PEERS": "a:1,b:1", "COLLAPSER_PEER_PLAINTEXT": "true"}, nil, "--peer-token-file (COLLAPSER_PEER_TOKEN_FILE)"},
		{"stray argument", nil, []string{"extra"}, "unexpected arguments"},
		{"unknown flag", nil, []string{"--nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		_, err := parseConfig(tt.args, testkit.Env(tt.env), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestParseConfig_HelpGoesToStdout(t *testing.T) {
	var stdout, stderr bytes.Buffer
	_, err := parseConfig([]string{"-h"}, testkit.Env(nil), &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("err = %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(stdout.String(), "-latency") || stderr.Len() != 0 {
		t.Errorf("stdout = %q, stderr = %q; want usage on stdout only", stdout.String(), stderr.String())
	}
}

// TestPeersOf_EverySidecarPeerSettingReachesPeers sets every peer setting
// of the sidecar's settings (Peers, Replicas, Peer...; a value of its own
// each) and checks that each is in the library's Peers, and that every
// setting of Peers is set: a setting added on either side and not mapped
// fails here (the library's test checks the way back).
func TestPeersOf_EverySidecarPeerSettingReachesPeers(t *testing.T) {
	var s collapserconfig.Settings
	sv := reflect.ValueOf(&s).Elem()
	set := map[string]string{} // value → the sidecar setting that holds it
	for i := range sv.NumField() {
		name := sv.Type().Field(i).Name
		if name != "Peers" && name != "Replicas" && !strings.HasPrefix(name, "Peer") {
			continue
		}
		switch f := sv.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(name + "-value")
			set[f.String()] = name
		case reflect.Bool:
			f.SetBool(true)
			set["true"] = name
		default:
			t.Fatalf("the sidecar's %s is a %s: map it by hand", name, f.Kind())
		}
	}
	found := map[string]bool{}
	pv := reflect.ValueOf(peersOf(s))
	for i := range pv.NumField() {
		f, name := pv.Field(i), pv.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			if f.String() == "" {
				t.Errorf("Peers.%s is not set from the sidecar's settings", name)
			}
			found[f.String()] = true
		case reflect.Bool:
			if !f.Bool() {
				t.Errorf("Peers.%s is not set from the sidecar's settings", name)
			}
			found["true"] = true
		}
	}
	for value, name := range set {
		if !found[value] {
			t.Errorf("the sidecar's %s (%q) reaches none of Peers' settings", name, value)
		}
	}
}
