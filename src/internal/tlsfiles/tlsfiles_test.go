package tlsfiles_test

import (
	"crypto/tls"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/collapser/collapser/src/internal/testkit"
	"github.com/collapser/collapser/src/internal/tlsfiles"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const release = "spiffe://cluster.local/ns/shop/collapser/hello"

// watch watches f, read again every few milliseconds, until the test ends.
func watch(t *testing.T, f testkit.CertFiles) *tlsfiles.Source {
	t.Helper()
	src, err := tlsfiles.Watch(tlsfiles.Files{Cert: f.Cert, Key: f.Key, CA: f.CA}, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// serve serves a health service with creds until the test ends, and
// returns its address.
func serve(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	srv := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis := testkit.Listen(t, "127.0.0.1:0")
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// check calls the health service at addr with creds, and returns the
// certificate the server presented.
func check(t *testing.T, addr string, creds credentials.TransportCredentials) (*tls.ConnectionState, error) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var p peer.Peer
	if _, err := healthpb.NewHealthClient(cc).Check(testkit.Context(t), &healthpb.HealthCheckRequest{}, grpc.Peer(&p)); err != nil {
		return nil, err
	}
	// credentials.TLSInfo, or what Mutual's clients make of it: the
	// connection's State either way.
	state := reflect.ValueOf(p.AuthInfo).FieldByName("State").Interface().(tls.ConnectionState)
	return &state, nil
}

func mutual(t *testing.T, src *tlsfiles.Source) credentials.TransportCredentials {
	t.Helper()
	c, err := src.Mutual()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMutual_OnlyAReplicaOfTheSameReleaseGetsIn(t *testing.T) {
	ca, dir := testkit.NewCA(t, "release CA"), t.TempDir()
	addr := serve(t, mutual(t, watch(t, ca.Issue(t, filepath.Join(dir, "server"), release))))
	other := testkit.NewCA(t, "another CA")
	tests := []struct {
		name  string
		files testkit.CertFiles
		want  string // "" for accepted
	}{
		{"a replica of the release", ca.Issue(t, filepath.Join(dir, "replica"), release), ""},
		{"another release, same CA", ca.Issue(t, filepath.Join(dir, "other-release"), "spiffe://cluster.local/ns/shop/collapser/other"), "not this release's"},
		{"the release's name, another CA", other.Issue(t, filepath.Join(dir, "forged"), release), "unknown authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := watch(t, tt.files)
			_, err := check(t, addr, mutual(t, client))
			if tt.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tt.want != "" && err == nil {
				t.Fatal("accepted")
			}
			// The server refuses too: a client that trusts anything and
			// presents the other certificate is not let in.
			pair, err := tls.LoadX509KeyPair(tt.files.Cert, tt.files.Key)
			if err != nil {
				t.Fatal(err)
			}
			_, err = check(t, addr, credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}))
			if (err == nil) != (tt.want == "") {
				t.Errorf("a client presenting this certificate to the server: %v", err)
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		if _, err := check(t, addr, credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})); err == nil {
			t.Error("accepted")
		}
	})
}

func TestMutual_ARenewedCertificateIsServedWithoutARestart(t *testing.T) {
	ca, dir := testkit.NewCA(t, "release CA"), t.TempDir()
	serverDir := filepath.Join(dir, "server")
	first := ca.Issue(t, serverDir, release)
	addr := serve(t, mutual(t, watch(t, first)))
	client := mutual(t, watch(t, ca.Issue(t, filepath.Join(dir, "client"), release)))
	state, err := check(t, addr, client)
	if err != nil {
		t.Fatal(err)
	}
	before := state.PeerCertificates[0].SerialNumber
	ca.Issue(t, serverDir, release) // the renewal, in the same files
	testkit.WaitFor(t, "the renewed certificate served", func() bool {
		state, err := check(t, addr, client)
		return err == nil && state.PeerCertificates[0].SerialNumber.Cmp(before) != 0
	})
}

func TestServerAndClient_ATLSOnlyBackendAndCallersWithCertificates(t *testing.T) {
	ca, dir := testkit.NewCA(t, "backend CA"), t.TempDir()
	backend := ca.Issue(t, filepath.Join(dir, "backend"), "backend.shop.svc")
	plain := watch(t, testkit.CertFiles{Cert: backend.Cert, Key: backend.Key})
	server, err := plain.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, server)
	trusting := watch(t, testkit.CertFiles{CA: backend.CA})
	if _, err := check(t, addr, trusting.Client("backend.shop.svc")); err != nil {
		t.Errorf("TLS to the backend by its name: %v", err)
	}
	if _, err := check(t, addr, trusting.Client("elsewhere.shop.svc")); err == nil || !strings.Contains(err.Error(), "elsewhere") {
		t.Errorf("a name the certificate does not carry: %v, want refused", err)
	}
	// With a CA, the listener asks every caller for a certificate.
	mtls, err := watch(t, backend).Server()
	if err != nil {
		t.Fatal(err)
	}
	mtlsAddr := serve(t, mtls)
	if _, err := check(t, mtlsAddr, trusting.Client("backend.shop.svc")); err == nil {
		t.Error("a caller without a certificate got in")
	}
	caller := watch(t, ca.Issue(t, filepath.Join(dir, "caller"), "caller.shop.svc"))
	if _, err := check(t, mtlsAddr, caller.Client("backend.shop.svc")); err != nil {
		t.Errorf("a caller with a certificate of the CA: %v", err)
	}
}

func TestWatch_RefusesFilesItCannotUse(t *testing.T) {
	ca, dir := testkit.NewCA(t, "CA"), t.TempDir()
	good := ca.Issue(t, dir, release)
	tests := []struct {
		name  string
		files tlsfiles.Files
		want  string
	}{
		{"a certificate without its key", tlsfiles.Files{Cert: good.Cert}, "needs its key"},
		{"a missing file", tlsfiles.Files{Cert: good.Cert, Key: filepath.Join(dir, "nope.key")}, "nope.key"},
		{"a key for a certificate", tlsfiles.Files{Cert: good.Key, Key: good.Key}, good.Key},
		{"a CA that is no certificate", tlsfiles.Files{CA: good.Key}, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := tlsfiles.Watch(tt.files, 0)
			if err == nil {
				src.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Watch() = %v, want an error naming %q", err, tt.want)
			}
		})
	}
	src := watch(t, testkit.CertFiles{Cert: good.Cert, Key: good.Key})
	if _, err := src.Mutual(); err == nil {
		t.Error("Mutual without a CA: no error")
	}
}

func TestMutual_ACallMayCarryTheCallersAuthority(t *testing.T) {
	// Replicas pass the callers' :authority on; the identity, not a host
	// name, is what the certificate was checked for.
	ca, dir := testkit.NewCA(t, "release CA"), t.TempDir()
	addr := serve(t, mutual(t, watch(t, ca.Issue(t, filepath.Join(dir, "server"), release))))
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(mutual(t, watch(t, ca.Issue(t, filepath.Join(dir, "client"), release)))))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := healthpb.NewHealthClient(cc).Check(testkit.Context(t), &healthpb.HealthCheckRequest{}, grpc.CallAuthority("hello.example")); err != nil {
		t.Errorf("a call with the authority hello.example: %v", err)
	}
}

func TestMutual_RenewalsUnderLoadLoseNoCall(t *testing.T) {
	// Both sides' certificates are renewed in place again and again while
	// calls go on, each over a connection of its own (a new handshake):
	// none fails, and the renewed certificates are the ones served.
	ca, dir := testkit.NewCA(t, "release CA"), t.TempDir()
	serverDir, clientDir := filepath.Join(dir, "server"), filepath.Join(dir, "client")
	addr := serve(t, mutual(t, watch(t, ca.Issue(t, serverDir, release))))
	client := mutual(t, watch(t, ca.Issue(t, clientDir, release)))
	stop := make(chan struct{})
	served := make(chan string, 1000)
	var failures atomic.Int64
	var firstFailure atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			state, err := check(t, addr, client)
			if err != nil {
				failures.Add(1)
				firstFailure.CompareAndSwap(nil, err.Error())
				continue
			}
			select {
			case served <- state.PeerCertificates[0].SerialNumber.String():
			default:
			}
		}
	}()
	seen := map[string]bool{}
	for range 5 {
		latest := ca.Issue(t, serverDir, release)
		ca.Issue(t, clientDir, release)
		pair, err := tls.LoadX509KeyPair(latest.Cert, latest.Key)
		if err != nil {
			t.Fatal(err)
		}
		want := pair.Leaf.SerialNumber.String()
		testkit.WaitFor(t, "the renewed certificate served", func() bool {
			for {
				select {
				case s := <-served:
					seen[s] = true
				default:
					return seen[want]
				}
			}
		})
	}
	close(stop)
	testkit.Recv(t, "the load's end", done)
	if n := failures.Load(); n != 0 {
		t.Errorf("%d calls failed during the renewals, the first: %v", n, firstFailure.Load())
	}
}
