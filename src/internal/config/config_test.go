package config

import (
	"errors"
	"flag"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestParse_NoConfigurationGivesDefaults(t *testing.T) {
	got, err := Parse(nil, testkit.Env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, Default()) {
		t.Errorf("Parse() = %+v, want defaults %+v", got, Default())
	}
	if got.Listen != ":50052" || got.Backend != "localhost:50051" || got.MetricsListen != ":2112" || got.Policy.CacheTTL != 100*time.Millisecond {
		t.Errorf("defaults are not the documented ones: %+v", got)
	}
}

func TestParse_EnvironmentAndFlags(t *testing.T) {
	vars := map[string]string{
		"COLLAPSER_CACHE_TTL":                       "250ms",
		"COLLAPSER_BACKEND":                         "10.0.0.1:9000",
		"COLLAPSER_KEY_HEADERS":                     " x-tenant , ,x-locale",
		"COLLAPSER_UNSAFE_SHARE_ACROSS_CREDENTIALS": "true",
		"COLLAPSER_LOG_LEVEL":                       "debug",
		"COLLAPSER_CACHE_CONTROL":                   "ignore",
		"COLLAPSER_MAX_TTL":                         "1m",
	}
	got, err := Parse([]string{"--backend", "localhost:7000", "--collapse-methods=/a.B/C,/a.B/D"}, testkit.Env(vars), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Policy.CacheTTL = 250 * time.Millisecond
	want.Backend = "localhost:7000" // the flag wins
	want.Key.KeyHeaders = []string{"x-tenant", "x-locale"}
	want.Key.ShareAcrossCredentials = true
	want.LogLevel = slog.LevelDebug
	want.Policy.CollapseMethods = []string{"/a.B/C", "/a.B/D"}
	want.Policy.IgnoreCacheControl = true
	want.Policy.MaxTTL = time.Minute
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParse_BadValuesNameTheirSource(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unparsable env duration", nil, map[string]string{"COLLAPSER_CACHE_TTL": "soon"}, `COLLAPSER_CACHE_TTL="soon"`},
		{"negative env ttl", nil, map[string]string{"COLLAPSER_CACHE_TTL": "-1s"}, `COLLAPSER_CACHE_TTL="-1s": must not be negative`},
		{"bad env integer", nil, map[string]string{"COLLAPSER_CACHE_MAX_ENTRIES": "many"}, "COLLAPSER_CACHE_MAX_ENTRIES"},
		{"zero entries flag", []string{"--cache-max-entries=0"}, nil, `invalid value "0" for flag -cache-max-entries: must be positive`},
		{"zero entries env", nil, map[string]string{"COLLAPSER_CACHE_MAX_ENTRIES": "0"}, `COLLAPSER_CACHE_MAX_ENTRIES="0": must be positive`},
		{"too many streams", []string{"--max-concurrent-streams=4294967296"}, nil, "-max-concurrent-streams: must be in [1, 4294967295]"},
		{"small header list", nil, map[string]string{"COLLAPSER_MAX_HEADER_BYTES": "1023"}, "COLLAPSER_MAX_HEADER_BYTES=\"1023\": must be in [1024, 4294967295]"},
		{"bad cache-control", []string{"--cache-control=obey"}, nil, "-cache-control: want honor or ignore"},
		{"zero max TTL", nil, map[string]string{"COLLAPSER_MAX_TTL": "0s"}, `COLLAPSER_MAX_TTL="0s": must be positive`},
		{"jitter of the whole TTL", nil, map[string]string{"COLLAPSER_TTL_JITTER": "1"}, `COLLAPSER_TTL_JITTER="1": must be at least 0 and under 1`},
		{"negative soft purge rate", []string{"--soft-purge-rate=-5"}, nil, `invalid value "-5" for flag -soft-purge-rate: must not be negative`},
		{"former flag name", []string{"--unary-methods=/a.B/C"}, nil, "renamed: use --collapse-methods (COLLAPSER_COLLAPSE_METHODS)"},
		{"former variable name", nil, map[string]string{"COLLAPSER_STREAM_CACHE_MAX_BYTES": "1"}, "COLLAPSER_STREAM_CACHE_MAX_BYTES=\"1\": renamed: use --stream-max-held-bytes"},
		{"bad address", nil, map[string]string{"COLLAPSER_LISTEN": "50052"}, "COLLAPSER_LISTEN"},
		{"bad bool", nil, map[string]string{"COLLAPSER_REFLECTION": "maybe"}, "COLLAPSER_REFLECTION"},
		{"bad log level", nil, map[string]string{"COLLAPSER_LOG_LEVEL": "loud"}, "COLLAPSER_LOG_LEVEL"},
		{"bad log format", []string{"--log-format=xml"}, nil, "-log-format: want json or text"},
		{"zero backend timeout", []string{"--backend-timeout=0s"}, nil, "-backend-timeout: must be positive"},
		{"negative memory limit", nil, map[string]string{"COLLAPSER_MEMORY_LIMIT": "-1"}, "COLLAPSER_MEMORY_LIMIT"},
		// 128 MiB: a Go heap of 115.2 MiB, less than the default caches' 128 MiB.
		{"memory limit below the caches", nil, map[string]string{"COLLAPSER_MEMORY_LIMIT": "134217728"}, "--cache-max-bytes + --stream-max-held-bytes = 134217728"},
		{"peers without a token", nil, map[string]string{"COLLAPSER_PEERS": "10.0.0.1:50053"}, "--peer-token-file (COLLAPSER_PEER_TOKEN_FILE): peers (--peers) need the release's peer token"},
		{"admin off loopback without a token", []string{"--admin-listen=0.0.0.0:50054"}, nil, "--admin-token-file (COLLAPSER_ADMIN_TOKEN_FILE): the admin listener 0.0.0.0:50054 is not on loopback"},
		{"remote admin callers without a token", nil, map[string]string{"COLLAPSER_ADMIN_ALLOW_REMOTE": "true"}, "--admin-allow-remote lets other addresses purge: they must carry a token"},
		{"admin socket without a path", []string{"--admin-listen=unix:"}, nil, "unix: names no socket file"},
		{"peer TLS without its CA", []string{"--peers=10.0.0.1:50053", "--peer-token-file=/t", "--peer-tls-cert-file=/c/tls.crt", "--peer-tls-key-file=/c/tls.key"}, nil, "needs all of --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file"},
		{"peer TLS without peers", nil, map[string]string{"COLLAPSER_PEER_TLS_CERT_FILE": "/c/tls.crt", "COLLAPSER_PEER_TLS_KEY_FILE": "/c/tls.key", "COLLAPSER_PEER_TLS_CA_FILE": "/c/ca.crt"}, "is for peers (--peers), which are off"},
		{"peers in plain text not chosen", []string{"--peers=10.0.0.1:50053", "--peer-token-file=/t"}, nil,
			"--peers (COLLAPSER_PEERS): calls between replicas need mutual TLS: set --peer-tls-cert-file, --peer-tls-key-file and --peer-tls-ca-file " +
				"(COLLAPSER_PEER_TLS_CERT_FILE, COLLAPSER_PEER_TLS_KEY_FILE, COLLAPSER_PEER_TLS_CA_FILE), or --peer-plaintext (COLLAPSER_PEER_PLAINTEXT)"},
		{"peers in plain text and over TLS", []string{"--peers=10.0.0.1:50053", "--peer-token-file=/t", "--peer-tls-cert-file=/c/tls.crt", "--peer-tls-key-file=/c/tls.key", "--peer-tls-ca-file=/c/ca.crt"},
			map[string]string{"COLLAPSER_PEER_PLAINTEXT": "true"}, "--peer-plaintext (COLLAPSER_PEER_PLAINTEXT): asks for plain text between replicas, but --peer-tls-cert-file"},
		{"plain text without peers", nil, map[string]string{"COLLAPSER_PEER_PLAINTEXT": "true"}, "--peer-plaintext (COLLAPSER_PEER_PLAINTEXT): is for peers (--peers), which are off"},
		{"unknown flag", []string{"--cache-tll=1s"}, nil, "cache-tll"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.args, testkit.Env(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() error = %v, want one naming %q", err, tt.want)
			}
		})
	}
}

func TestParse_PeersTalkMutualTLSOrPlainTextByChoice(t *testing.T) {
	withPeers := []string{"--peers=10.0.0.1:50053", "--peer-token-file=/t"}
	tls := []string{"--peer-tls-cert-file=/c/tls.crt", "--peer-tls-key-file=/c/tls.key", "--peer-tls-ca-file=/c/ca.crt"}
	for _, tt := range []struct {
		name      string
		args      []string
		env       map[string]string
		plaintext bool
	}{
		{"mutual TLS", append(withPeers, tls...), nil, false},
		{"plain text by flag", append(withPeers, "--peer-plaintext"), nil, true},
		{"plain text by variable", withPeers, map[string]string{"COLLAPSER_PEER_PLAINTEXT": "true"}, true},
		{"no peers", nil, map[string]string{"COLLAPSER_PEER_PLAINTEXT": "false"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(tt.args, testkit.Env(tt.env), io.Discard)
			if err != nil || c.PeerPlaintext != tt.plaintext {
				t.Errorf("Parse() = plain text %v, %v; want %v, no error", c.PeerPlaintext, err, tt.plaintext)
			}
		})
	}
}

func TestGoMemoryLimit_IsNinetyPercentOfTheContainersLimit(t *testing.T) {
	for _, tt := range []struct{ limit, want int64 }{
		{0, 0},
		{256 << 20, 241591860}, // 256 MiB
		{1000, 900},
	} {
		c := Default()
		c.MemoryLimit = tt.limit
		if got := c.GoMemoryLimit(); got != tt.want {
			t.Errorf("MemoryLimit %d: GoMemoryLimit() = %d, want %d", tt.limit, got, tt.want)
		}
	}
	c, err := Parse(nil, testkit.Env(map[string]string{"COLLAPSER_MEMORY_LIMIT": "268435456"}), io.Discard)
	if err != nil || c.MemoryLimit != 256<<20 {
		t.Errorf("Parse(COLLAPSER_MEMORY_LIMIT=268435456) = %d, %v; want 256 MiB accepted", c.MemoryLimit, err)
	}
}

func TestParse_HelpListsEveryVariable(t *testing.T) {
	var out strings.Builder
	_, err := Parse([]string{"-h"}, testkit.Env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, f := range []string{"COLLAPSER_CACHE_TTL", "cache-ttl", "key-headers", "unsafe-share-across-credentials"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("usage lacks %s", f)
		}
	}
}

func TestEnvName(t *testing.T) {
	if got := EnvName("cache-max-entry-bytes"); got != "COLLAPSER_CACHE_MAX_ENTRY_BYTES" {
		t.Errorf("EnvName = %q", got)
	}
}

func TestParse_AVariableSetButEmptyMeansWhatTheEmptyFlagMeans(t *testing.T) {
	c := Default()
	flagSet(&c).VisitAll(func(f *flag.Flag) {
		name := EnvName(f.Name)
		fromEnv, envErr := Parse(nil, testkit.Env(map[string]string{name: ""}), io.Discard)
		fromFlag, flagErr := Parse([]string{"--" + f.Name + "="}, testkit.Env(nil), io.Discard)
		switch {
		case (envErr == nil) != (flagErr == nil):
			t.Errorf("%s=\"\": %v; --%s=\"\": %v; want both to take it or both to refuse it", name, envErr, f.Name, flagErr)
		case envErr != nil && !strings.Contains(envErr.Error(), name) && !strings.Contains(envErr.Error(), "--"+f.Name):
			t.Errorf("%s=\"\": %v, want an error naming it", name, envErr)
		case envErr == nil && !reflect.DeepEqual(fromEnv, fromFlag):
			t.Errorf("%s=\"\" gives %+v, --%s=\"\" gives %+v", name, fromEnv, f.Name, fromFlag)
		}
	})
	// The case that started the rule: an empty variable turns the admin
	// service off, as the README says.
	cfg, err := Parse(nil, testkit.Env(map[string]string{"COLLAPSER_ADMIN_LISTEN": ""}), io.Discard)
	if err != nil || cfg.AdminListen != "" {
		t.Errorf("COLLAPSER_ADMIN_LISTEN=\"\": admin listen %q, %v; want none", cfg.AdminListen, err)
	}
}
