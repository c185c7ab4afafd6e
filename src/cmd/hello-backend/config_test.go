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

	"github.com/collapser/collapser/src/collapser"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestParseConfig_DefaultsEnvAndFlagsInThatOrder(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want config
	}{
		{"defaults", nil, nil, config{listen: ":50051", metricsListen: ":2113", latency: 50 * time.Millisecond, shutdownTimeout: 10 * time.Second,
			logLevel: slog.LevelWarn, peers: collapser.Peers{Listen: ":50053"}}},
		{"env", map[string]string{"HELLO_LISTEN": ":1", "HELLO_METRICS_LISTEN": ":2", "HELLO_LATENCY": "1s", "HELLO_STREAM_INTERVAL": "5ms", "HELLO_REPLY_BYTES": "1024", "HELLO_LOG_LEVEL": "debug",
			"HELLO_COLLAPSE": "true", "HELLO_COLLAPSE_POLICY_FILE": "/p.yaml", "HELLO_COLLAPSE_PEERS": "dns:///hello-peers:50053", "HELLO_COLLAPSE_PEER_TOKEN_FILE": "/token",
			"HELLO_COLLAPSE_PEER_PLAINTEXT": "true"}, nil,
			config{listen: ":1", metricsListen: ":2", latency: time.Second, streamInterval: 5 * time.Millisecond, replyBytes: 1024, shutdownTimeout: 10 * time.Second,
				logLevel: slog.LevelDebug, collapse: true, collapsePolicy: "/p.yaml",
				peers: collapser.Peers{Target: "dns:///hello-peers:50053", Listen: ":50053", TokenFile: "/token", Plaintext: true}}},
		{"flags win", map[string]string{"HELLO_LISTEN": ":1", "HELLO_LATENCY": "1s"}, []string{"--listen", ":3", "--latency", "0", "--shutdown-timeout", "1s"},
			config{listen: ":3", metricsListen: ":2113", shutdownTimeout: time.Second, logLevel: slog.LevelWarn, peers: collapser.Peers{Listen: ":50053"}}},
	}
	for _, tt := range tests {
		got, err := parseConfig(tt.args, testkit.Env(tt.env), io.Discard, io.Discard)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parseConfig = %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
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
		{"policy without the interceptor", nil, []string{"--collapse-policy-file", "/p.yaml"}, "--collapse-policy-file (HELLO_COLLAPSE_POLICY_FILE) needs --collapse (HELLO_COLLAPSE)"},
		{"peers without the interceptor", map[string]string{"HELLO_COLLAPSE_PEERS": "a:1,b:1"}, nil, "--collapse-peers (HELLO_COLLAPSE_PEERS) needs --collapse (HELLO_COLLAPSE)"},
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
