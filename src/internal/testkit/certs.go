package testkit

import (
	"testing"

	"github.com/collapser/collapser/src/pkitest"
)

// CA is a certificate authority of a test, as a release's CA is
// (pkitest.CA); its methods fail the test on error.
type CA struct{ ca *pkitest.CA }

// CertFiles are the paths of a certificate, its key and the CA that signed
// it, in one directory as a Secret volume holds them.
type CertFiles = pkitest.Files

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := pkitest.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{ca}
}

// PEM returns the CA's certificate in PEM.
func (ca *CA) PEM() []byte { return ca.ca.PEM() }

// Issue writes a certificate for identity into dir (pkitest.CA.Issue).
func (ca *CA) Issue(t testing.TB, dir, identity string) CertFiles {
	t.Helper()
	f, err := ca.ca.Issue(dir, identity)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
