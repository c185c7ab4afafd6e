package sidecar

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
	"github.com/collapser/collapser/src/internal/config"
	"github.com/collapser/collapser/src/internal/proxy"
	"github.com/collapser/collapser/src/internal/testkit"
)

// tlsCaller returns the transport of a caller that trusts ca (nil: any
// server) and presents the certificate of f (nil: none).
func tlsCaller(t *testing.T, ca []byte, f *testkit.CertFiles) grpc.DialOption {
	t.Helper()
	cfg := &tls.Config{ServerName: "hello.shop.svc", InsecureSkipVerify: ca == nil}
	if ca != nil {
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM(ca)
	}
	if f != nil {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(cfg))
}

func TestSidecar_CallersWithCertificatesThroughToATLSOnlyBackend(t *testing.T) {
	ca, dir := testkit.NewCA(t, "shop CA"), t.TempDir()
	// The backend serves TLS only, as the workload did before the sidecar.
	served := ca.Issue(t, filepath.Join(dir, "backend"), "hello.shop.svc")
	pair, err := tls.LoadX509KeyPair(served.Cert, served.Key)
	if err != nil {
		t.Fatal(err)
	}
	backend := &testkit.Greeter{SayHello: greet, Services: registerReflection}
	backendAddr := backend.Start(t, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}})))
	// The sidecar serves what the workload served: its certificate, and
	// mutual TLS with the callers' certificates.
	listener := ca.Issue(t, filepath.Join(dir, "sidecar"), "hello.shop.svc")
	alice := ca.Issue(t, filepath.Join(dir, "alice"), "alice.shop.svc")
	bob := ca.Issue(t, filepath.Join(dir, "bob"), "bob.shop.svc")
	sc := startSidecar(t, backendAddr, func(c *config.Settings) {
		c.Policy.CollapseMethods = []string{sayHello}
		c.Policy.CacheTTL = time.Hour
		c.TLSCertFile, c.TLSKeyFile, c.TLSClientCAFile = listener.Cert, listener.Key, listener.CA
		c.BackendTLS, c.BackendTLSCAFile, c.BackendTLSServerName = true, served.CA, "hello.shop.svc"
	}, dialedWith(tlsCaller(t, ca.PEM(), &alice)))
	call := func(caller *testkit.CertFiles, md ...string) (*hellov1.HelloReply, error) {
		conn := dial(t, sc.addr, tlsCaller(t, ca.PEM(), caller))
		ctx := metadata.AppendToOutgoingContext(testkit.Context(t), md...)
		return hellov1.NewGreeterClient(conn).SayHello(ctx, &hellov1.HelloRequest{Name: "ann"})
	}
	first, err := call(&alice)
	if err != nil {
		t.Fatalf("alice through TLS to the TLS-only backend: %v", err)
	}
	if again, err := call(&alice); err != nil || again.GetCall() != first.GetCall() {
		t.Errorf("alice again: call %d, %v; want her kept answer, call %d", again.GetCall(), err, first.GetCall())
	}
	// Bob's certificate is another credential: his own answer, even when he
	// writes alice's certificate's header himself.
	alicePair, err := tls.LoadX509KeyPair(alice.Cert, alice.Key)
	if err != nil {
		t.Fatal(err)
	}
	aliceSum := sha256.Sum256(alicePair.Leaf.Raw)
	forged := "Hash=" + hex.EncodeToString(aliceSum[:])
	for _, md := range [][]string{nil, {proxy.ClientCertHeader, forged}} {
		resp, err := call(&bob, md...)
		if err != nil || resp.GetCall() == first.GetCall() {
			t.Errorf("bob (headers %v): call %d, %v; want a call of his own, not alice's %d", md, resp.GetCall(), err, first.GetCall())
		}
	}
	if _, err := call(nil); err == nil {
		t.Error("a caller without a certificate got in")
	}
	if n := backend.Calls.SayHello.Load(); n != 2 {
		t.Errorf("backend calls = %d, want 2: alice's, and bob's shared by his two calls", n)
	}
	// The kubelet's gRPC probe speaks plain text: it asks the metrics port.
	for _, path := range []string{LivezPath, ReadyzPath} {
		resp, err := http.Get("http://" + sc.metricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "SERVING\n" {
			t.Errorf("GET %s = %d %q, want 200 SERVING", path, resp.StatusCode, body)
		}
	}
}
