package certs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/pki"
	"github.com/collapser/collapser/src/internal/testkit"
)

// mount is a Secret's volume as the kubelet writes it: each file is a link
// into ..data, itself a link to a directory of one version, which an update
// replaces at once with a rename.
type mount struct {
	dir      string
	versions int
}

func newMount(t *testing.T) *mount { return &mount{dir: t.TempDir()} }

// write puts a new version of the files in place, as the kubelet does after
// the Secret changed.
func (m *mount) write(t *testing.T, cert, key []byte) {
	t.Helper()
	m.versions++
	version := fmt.Sprintf("..version_%d", m.versions)
	if err := os.Mkdir(filepath.Join(m.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{KeyCert: cert, KeyKey: key}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(m.dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(m.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(m.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			t.Fatal(err)
		}
	}
}

// mustIssue makes a CA and a serving certificate for names, valid from now.
func mustIssue(t *testing.T, now time.Time, names ...string) issued {
	t.Helper()
	iss, err := issue(names, now, testValidity)
	if err != nil {
		t.Fatal(err)
	}
	return iss
}

func newFiles(t *testing.T, dir string, clk *clock) *Files {
	t.Helper()
	f, err := NewFiles(FilesOptions{Dir: dir, DNSNames: []string{testDNSName, "injector"}, Now: clk.Now}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// serial is the serial number of the certificate f serves, "" for none.
func serial(f *Files) string {
	c, err := f.GetCertificate(nil)
	if err != nil {
		return ""
	}
	return c.Leaf.SerialNumber.String()
}

func serialOf(t *testing.T, iss issued) string {
	t.Helper()
	return pki.ParseCerts(iss.cert)[0].SerialNumber.String()
}

func TestNewFiles_NeedsTheDirectoryAndTheNames(t *testing.T) {
	for _, opts := range []FilesOptions{{DNSNames: []string{testDNSName}}, {Dir: t.TempDir()}} {
		if _, err := NewFiles(opts, slog.New(slog.DiscardHandler)); err == nil {
			t.Errorf("NewFiles(%+v) = nil error", opts)
		}
	}
}

// TestFiles_ServesTheMountedCertificate: once loaded, the files'
// certificate is served, ready, and completes a handshake with a client
// that trusts its CA; loading unchanged files serves the same certificate
// without parsing it again.
func TestFiles_ServesTheMountedCertificate(t *testing.T) {
	m := newMount(t)
	f := newFiles(t, m.dir, &clock{time.Now()})
	if err := f.Load(); err == nil || f.Ready() == nil {
		t.Errorf("without files: Load = %v, Ready = %v; want errors", err, f.Ready())
	}
	iss := mustIssue(t, time.Now(), testDNSName, "injector")
	m.write(t, iss.cert, iss.key)
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	if err := f.Ready(); err != nil {
		t.Errorf("Ready = %v", err)
	}
	if err := handshake(t, f.GetCertificate, iss.caCert); err != nil {
		t.Errorf("handshake: %v", err)
	}
	before, _ := f.GetCertificate(nil)
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.GetCertificate(nil); after != before {
		t.Error("unchanged files were loaded again")
	}
}

// TestFiles_RunPicksUpARenewal: after the issuer renewed the certificate
// into the Secret and the kubelet swapped the volume's files, Run serves
// the new certificate within an interval, and clients that trust the new
// CA complete their handshakes.
func TestFiles_RunPicksUpARenewal(t *testing.T) {
	m := newMount(t)
	first := mustIssue(t, time.Now(), testDNSName, "injector")
	m.write(t, first.cert, first.key)
	f := newFiles(t, m.dir, &clock{time.Now()})
	ctx, cancel := context.WithCancel(testkit.Context(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.Run(ctx, 10*time.Millisecond)
	}()
	testkit.WaitFor(t, "the first certificate served", func() bool { return serial(f) == serialOf(t, first) })

	second := mustIssue(t, time.Now(), testDNSName, "injector")
	m.write(t, second.cert, second.key)
	testkit.WaitFor(t, "the renewed certificate served", func() bool { return serial(f) == serialOf(t, second) })
	if err := handshake(t, f.GetCertificate, second.caCert); err != nil {
		t.Errorf("handshake trusting the new CA: %v", err)
	}
	cancel()
	testkit.Recv(t, "Run's return", done)
}

// TestFiles_KeepsServingWhenNewFilesDoNotLoad: files that do not make a
// valid pair for the names are refused with a reason, and the certificate
// served before stays served and ready.
func TestFiles_KeepsServingWhenNewFilesDoNotLoad(t *testing.T) {
	now := time.Now()
	good := mustIssue(t, now, testDNSName, "injector")
	other := mustIssue(t, now, testDNSName, "injector")
	elsewhere := mustIssue(t, now, "other.collapser.svc")
	tests := []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"a key of another certificate (the volume between two versions)", other.cert, good.key, "private key does not match public key"},
		{"a certificate for other names", elsewhere.cert, elsewhere.key, testDNSName},
		{"no certificate", []byte("not PEM"), good.key, "failed to find any PEM data in certificate input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMount(t)
			m.write(t, good.cert, good.key)
			f := newFiles(t, m.dir, &clock{now})
			if err := f.Load(); err != nil {
				t.Fatal(err)
			}
			m.write(t, tt.cert, tt.key)
			if err := f.Load(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v, want an error saying %q", err, tt.want)
			}
			if serial(f) != serialOf(t, good) || f.Ready() != nil {
				t.Errorf("serving %s (ready: %v), want the certificate loaded before", serial(f), f.Ready())
			}
		})
	}
}

// TestFiles_ReadyOnlyWhileTheCertificateIsValid: a certificate the issuer
// failed to renew makes the injector unready once it expires.
func TestFiles_ReadyOnlyWhileTheCertificateIsValid(t *testing.T) {
	m := newMount(t)
	iss := mustIssue(t, t0, testDNSName, "injector")
	m.write(t, iss.cert, iss.key)
	clk := &clock{t0}
	f := newFiles(t, m.dir, clk)
	if err := f.Load(); err != nil {
		t.Fatal(err)
	}
	if err := f.Ready(); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	clk.now = t0.Add(testValidity + time.Second)
	if err := f.Ready(); err == nil || !strings.Contains(err.Error(), "not now") {
		t.Errorf("Ready after expiry = %v, want an error", err)
	}
}
