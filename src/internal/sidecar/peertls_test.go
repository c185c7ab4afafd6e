package sidecar

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	adminv1 "github.com/collapser/collapser/src/api/admin/v1"
	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	peerv1 "github.com/collapser/collapser/src/api/peer/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/peers"
	"github.com/collapser/collapser/src/internal/testkit"
)

// peerCalls are a call of each kind the peer port serves: a forwarded call,
// a purge and a Sync, made on conn with ctx.
func peerCalls(conn *grpc.ClientConn) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"a forwarded call": func(ctx context.Context) error {
			ctx = metadata.AppendToOutgoingContext(ctx, peers.HopHeader, "1")
			_, err := hellov1.NewGreeterClient(conn).SayHello(ctx, &hellov1.HelloRequest{Name: "ann"})
			return err
		},
		"a purge": func(ctx context.Context) error {
			_, err := adminv1.NewCacheClient(conn).Purge(ctx, &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}})
			return err
		},
		"a Sync": func(ctx context.Context) error {
			_, err := peerv1.NewReplicasClient(conn).Sync(ctx, &peerv1.SyncRequest{})
			return err
		},
	}
}

func TestPeerPort_OverMutualTLSOnlyTheReleasesCertificatesGetIn(t *testing.T) {
	lis := testkit.Listen(t, "127.0.0.1:0")
	rel := newRelease(t)
	backend := &testkit.Greeter{SayHello: greet}
	startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
		c.Peers = lis.Addr().String()
		c.PeerListen = lis.Addr().String()
		c.PeerTokenFile = testkit.SecretFile(t, releaseToken)
		c.Policy.CollapseMethods = []string{sayHello}
		rel.certify(t, c)
	}, peerListener(lis))
	// A client that trusts any server and presents the certificate given:
	// what the peer port lets in is its own decision.
	presenting := func(f *testkit.CertFiles) grpc.DialOption { return tlsCaller(t, nil, f) }
	dir := t.TempDir()
	replica := rel.certify(t, nil)
	otherRelease := rel.certify(t, nil, "spiffe://cluster.local/ns/test/collapser/other")
	forged := testkit.NewCA(t, "another CA").Issue(t, filepath.Join(dir, "forged"), releaseIdentity)
	for _, tt := range []struct {
		name      string
		transport grpc.DialOption
		token     bool
		want      codes.Code
	}{
		{"plain text", grpc.WithTransportCredentials(insecure.NewCredentials()), true, codes.Unavailable},
		{"no client certificate", presenting(nil), true, codes.Unavailable},
		{"another release's certificate from the same CA", presenting(&otherRelease), true, codes.Unavailable},
		{"the release's identity signed by another CA", presenting(&forged), true, codes.Unavailable},
		{"the release's certificate without the token", presenting(&replica), false, codes.Unauthenticated},
		{"the release's certificate and token", presenting(&replica), true, codes.OK},
	} {
		conn, err := grpc.NewClient(lis.Addr().String(), tt.transport)
		if err != nil {
			t.Fatal(err)
		}
		for call, do := range peerCalls(conn) {
			ctx := testkit.Context(t)
			if tt.token {
				ctx = metadata.AppendToOutgoingContext(ctx, peers.TokenHeader, releaseToken)
			}
			if err := do(ctx); status.Code(err) != tt.want {
				t.Errorf("%s with %s: %v, want %v", call, tt.name, err, tt.want)
			}
		}
		conn.Close()
	}
	if n := backend.Calls.SayHello.Load(); n != 1 {
		t.Errorf("backend calls = %d, want 1: only the call with the release's certificate and token", n)
	}
}

func TestPeers_PlainTextIsRefusedAtStartUnlessChosen(t *testing.T) {
	token := testkit.SecretFile(t, releaseToken)
	files := newRelease(t).certify(t, nil)
	for _, tt := range []struct {
		name string
		edit func(*config.Settings)
		want []string // what the error names
	}{
		{"neither mutual TLS nor plain text", func(*config.Settings) {}, []string{"COLLAPSER_PEERS",
			"COLLAPSER_PEER_TLS_CERT_FILE", "COLLAPSER_PEER_TLS_KEY_FILE", "COLLAPSER_PEER_TLS_CA_FILE", "COLLAPSER_PEER_PLAINTEXT"}},
		{"both", func(c *config.Settings) {
			c.PeerPlaintext = true
			c.PeerTLSCertFile, c.PeerTLSKeyFile, c.PeerTLSCAFile = files.Cert, files.Key, files.CA
		}, []string{"COLLAPSER_PEER_PLAINTEXT", "COLLAPSER_PEER_TLS_CERT_FILE"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Backend = "127.0.0.1:1"
			cfg.Peers = "127.0.0.1:2"
			cfg.PeerTokenFile = token
			tt.edit(&cfg)
			_, err := New(cfg, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("New: the sidecar starts")
			}
			for _, name := range tt.want {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("New: %v, want an error naming %s", err, name)
				}
			}
		})
	}
	t.Run("plain text chosen", func(t *testing.T) {
		var log logrecorder.Recorder
		own := testkit.Listen(t, "127.0.0.1:0")
		startSidecar(t, startBackend(t, &testkit.Greeter{SayHello: greet}), func(c *config.Settings) {
			c.Peers, c.PeerListen = own.Addr().String(), own.Addr().String()
			c.PeerTokenFile = token
			c.PeerPlaintext = true
		}, peerListener(own), logTo(slog.New(&log)))
		if n := log.Count(slog.LevelWarn, "calls between replicas are plain text", "", ""); n != 1 {
			t.Errorf("%d warnings that the calls between replicas are plain text, want 1; logged %q", n, log.Messages())
		}
	})
}

// startRelayed starts two replicas in front of their own greeters, peered
// through relays that see every byte between them, with or without mutual
// TLS.
func startRelayed(t *testing.T, mutualTLS bool) ([]*replica, []*testkit.Relay) {
	t.Helper()
	token := testkit.SecretFile(t, releaseToken)
	rel := newRelease(t)
	lis := make([]net.Listener, 2)
	relays := make([]*testkit.Relay, 2)
	addrs := make([]string, 2)
	for i := range lis {
		lis[i] = testkit.Listen(t, "127.0.0.1:0")
		relays[i] = testkit.NewRelay(t, lis[i].Addr().String())
		addrs[i] = relays[i].Addr()
	}
	rs := make([]*replica, 2)
	for i := range rs {
		backend := &testkit.Greeter{SayHello: greet}
		sc := startSidecar(t, startBackend(t, backend), func(c *config.Settings) {
			c.Policy.CollapseMethods = []string{sayHello}
			c.Peers = strings.Join(addrs, ",")
			c.PeerListen = addrs[i]
			c.PeerTokenFile = token
			if mutualTLS {
				rel.certify(t, c)
			} else {
				c.PeerPlaintext = true
			}
		}, peerListener(lis[i]))
		conn := dial(t, sc.addr, grpc.WithAuthority("hello.example"))
		waitServing(t, conn)
		rs[i] = &replica{backend: backend, sidecar: sc, client: hellov1.NewGreeterClient(conn)}
	}
	waitLeases(t, rs)
	return rs, relays
}

func TestPeers_ARelayBetweenReplicasSeesNoPlaintextAndCannotAlterAnAnswer(t *testing.T) {
	const (
		secret = "Bearer caller-secret-5f0e1d"
		name   = "confidential-alice"
	)
	for _, tt := range []struct {
		name      string
		mutualTLS bool
	}{
		// Plain text shows the relay can see what the test looks for.
		{"plain text", false},
		{"mutual TLS", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs, relays := startRelayed(t, tt.mutualTLS)
			ctx := metadata.AppendToOutgoingContext(testkit.Context(t), "authorization", secret)
			for _, r := range rs { // one of them forwards to the other
				resp, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: name})
				if err != nil || resp.GetMessage() != "Hello, "+name {
					t.Fatalf("SayHello = %v, %v", resp, err)
				}
			}
			if n := backendCalls(rs); n != 1 {
				t.Errorf("backend calls = %d, want 1: one replica forwarded to the other", n)
			}
			purge := &adminv1.PurgeRequest{Selector: &adminv1.PurgeRequest_Method{Method: sayHello}}
			if _, err := adminv1.NewCacheClient(dial(t, rs[0].sidecar.adminAddr)).Purge(testkit.Context(t), purge); err != nil {
				t.Fatalf("Purge: %v", err)
			}
			var carried []byte
			for _, r := range relays {
				carried = append(carried, r.Carried()...)
			}
			if len(carried) == 0 {
				t.Fatal("the relays carried nothing: no call went between the replicas")
			}
			for _, plain := range []string{secret, name, sayHello} {
				if seen := bytes.Contains(carried, []byte(plain)); seen == tt.mutualTLS {
					t.Errorf("the relays saw %q: %v", plain, seen)
				}
			}
			// HPACK may code the token (Huffman): in plain text it need
			// not show as it is, under TLS it must not.
			if tt.mutualTLS && bytes.Contains(carried, []byte(releaseToken)) {
				t.Error("the relays saw the peer token")
			}
			if !tt.mutualTLS {
				return
			}
			// The relays now flip every bit the replicas send each other,
			// on connections made anew: no answer changes, whoever
			// serves it.
			for _, r := range relays {
				r.Alter(func(b []byte) {
					for i := range b {
						b[i] ^= 0xff
					}
				})
				r.Heal()
			}
			for i := range 10 {
				for _, r := range rs {
					who := name + "-" + string(rune('a'+i))
					resp, err := r.client.SayHello(ctx, &hellov1.HelloRequest{Name: who})
					if err == nil && (resp.GetMessage() != "Hello, "+who || resp.GetCaller() != secret) {
						t.Errorf("an answer altered on its way: %v", resp)
					}
				}
			}
		})
	}
}
