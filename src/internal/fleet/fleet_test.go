package fleet

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// peered returns settings of a replica with two peers, in plain text,
// changed by edit.
func peered(t *testing.T, edit func(*config.Settings)) config.Settings {
	cfg := config.Default()
	cfg.Peers, cfg.PeerListen = "127.0.0.1:1,127.0.0.1:2", "127.0.0.1:1"
	cfg.PeerTokenFile = testkit.SecretFile(t, strings.Repeat("t", 32))
	cfg.PeerPlaintext = true
	if edit != nil {
		edit(&cfg)
	}
	return cfg
}

func TestDial_ErrorsNameTheSetting(t *testing.T) {
	tests := []struct {
		name string
		edit func(*config.Settings)
		want string
	}{
		{"no token", func(c *config.Settings) { c.PeerTokenFile = filepath.Join(t.TempDir(), "none") }, "peer token (COLLAPSER_PEER_TOKEN_FILE)"},
		{"a short token", func(c *config.Settings) { c.PeerTokenFile = testkit.SecretFile(t, "short") }, "peer token (COLLAPSER_PEER_TOKEN_FILE)"},
		{"neither TLS nor plain text", func(c *config.Settings) { c.PeerPlaintext = false }, "calls between replicas need mutual TLS"},
		{"TLS files that are not there", func(c *config.Settings) {
			c.PeerPlaintext = false
			c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = "/nonexistent/tls.crt", "/nonexistent/tls.key", "/nonexistent/ca.crt"
		}, "peer TLS (COLLAPSER_PEER_TLS_CERT_FILE)"},
		{"plain text without peers", func(c *config.Settings) { c.Peers = "" }, "--peer-plaintext"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Dial(peered(t, tt.edit), slog.New(slog.DiscardHandler))
			if f != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Dial = %v, %v; want an error containing %q", f, err, tt.want)
			}
		})
	}
}

func TestDial_NoPeersIsNoFleet(t *testing.T) {
	f, err := Dial(config.Default(), slog.New(slog.DiscardHandler))
	if f != nil || err != nil {
		t.Errorf("Dial without peers = %v, %v; want nil, nil", f, err)
	}
}

func TestDial_PlainTextIsWarnedOfAndAFleetReportsItsMembers(t *testing.T) {
	var log logrecorder.Recorder
	f, err := Dial(peered(t, nil), slog.New(&log))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n := log.Count(slog.LevelWarn, "calls between replicas are plain text", "", ""); n != 1 {
		t.Errorf("%d warnings of plain text, want 1; logged %q", n, log.Messages())
	}
	if got := f.State(); got.Members != 2 || got.Leases != nil {
		t.Errorf("State before Join = %+v, want 2 members and no leases", got)
	}
	if f.Replicas() != nil {
		t.Error("Replicas before Join is not nil")
	}
}
