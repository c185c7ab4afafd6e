package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientretry "k8s.io/client-go/util/retry"
)

// renewalWait bounds the wait for every sidecar to serve a renewed
// certificate: the kubelet updates a Secret's volume within its sync
// period and cache TTL (about a minute each), and the sidecar reads its
// files again every 10 s. A wait for a busy machine, not a bound.
const renewalWait = 5 * time.Minute

// peerIssuerCA is the Secret, in the release's namespace, of the CA the
// injector issues workloads' peer certificates with, and of the list of
// the Secrets it issued them into (issued.json).
const peerIssuerCA = injectorName + "-peer-ca"

// checkIssuedPeerCertificate checks the peers' Secret the injector wrote
// when their first pod was admitted: labelled as the injector's, listed in
// its CA's Secret, and a certificate of the workload's own identity (its
// namespace and peers Service) that verifies against the ca.crt beside it.
func (c *injectorChecks) checkIssuedPeerCertificate(t *testing.T) {
	ns := c.kubectl.Namespace
	secret, err := c.client.CoreV1().Secrets(ns).Get(t.Context(), peersTLS, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the injector issued no peer certificate: %v", err)
	}
	if got := secret.Labels["app.kubernetes.io/managed-by"]; got != "collapser-injector" {
		t.Errorf("secret %s is managed by %q, want collapser-injector", peersTLS, got)
	}
	leaf := parseCerts(t, secret.Data["tls.crt"])[0]
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data["ca.crt"])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the issued certificate does not verify against its ca.crt: %v", err)
	}
	want := fmt.Sprintf("spiffe://cluster.local/ns/%s/collapser/%s", ns, peersService)
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		t.Errorf("the issued certificate names %v, want %s", leaf.URIs, want)
	}
	if !slices.ContainsFunc(c.issuedList(t), func(e issuedEntry) bool { return e.Namespace == ns && e.Secret == peersTLS }) {
		t.Errorf("secret %s/%s is not in the injector's list of issued certificates", ns, peersTLS)
	}
}

// issuedEntry is one entry of the injector's list of issued peer
// certificates (package certs: the test module cannot import it).
type issuedEntry struct {
	Namespace string `json:"namespace"`
	Secret    string `json:"secret"`
	Signer    string `json:"signer"`
}

// issuedList reads the injector's list of issued peer certificates.
func (c *injectorChecks) issuedList(t *testing.T) []issuedEntry {
	t.Helper()
	ca, err := c.client.CoreV1().Secrets(c.release.Namespace).Get(t.Context(), peerIssuerCA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var list []issuedEntry
	if err := json.Unmarshal(ca.Data["issued.json"], &list); err != nil {
		t.Fatalf("%s's issued.json: %v", peerIssuerCA, err)
	}
	return list
}

// forceRenewal has the injector renew the peers' certificate at its next
// check, as it does when a new CA starts to sign: the peers' entry in its
// list says another CA signed it.
func (c *injectorChecks) forceRenewal(t *testing.T) {
	t.Helper()
	err := clientretry.RetryOnConflict(clientretry.DefaultRetry, func() error {
		secrets := c.client.CoreV1().Secrets(c.release.Namespace)
		ca, err := secrets.Get(t.Context(), peerIssuerCA, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var list []map[string]any
		if err := json.Unmarshal(ca.Data["issued.json"], &list); err != nil {
			return err
		}
		for _, e := range list {
			if e["namespace"] == c.kubectl.Namespace && e["secret"] == peersTLS {
				e["signer"] = "a CA renewed since"
			}
		}
		if ca.Data["issued.json"], err = json.Marshal(list); err != nil {
			return err
		}
		_, err = secrets.Update(t.Context(), ca, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("mark the peers' certificate due in %s: %v", peerIssuerCA, err)
	}
}

// peerRenewal has the injector renew the peers' certificate in place (a
// new certificate and key of the same identity, from the same CA, in the
// same Secret) while bursts of distinct keys run over the three replicas
// (two thirds of their calls cross pods, over mutual TLS): no call of any
// burst fails, and each sidecar serves the renewed certificate on its peer
// port without a restart.
func (c *injectorChecks) peerRenewal(t *testing.T) {
	ns := c.kubectl.Namespace
	pods := waitForPods(t, c.kubectl, appSelector(peersApp), replicas)
	secrets := c.client.CoreV1().Secrets(ns)
	before, err := secrets.Get(t.Context(), peersTLS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	was := serialOf(t, before.Data["tls.crt"])

	type tally struct {
		bursts, requests, errors int
		err                      error
	}
	bursts := newSpreadBurster(c.s, c.kubectl, peersApp, peersService)
	stop := make(chan struct{})
	done := make(chan tally, 1)
	go func() {
		var n tally
		defer func() { done <- n }()
		for {
			r, err := bursts.run(t, fmt.Sprint("renewal-", n.bursts), "--distinct", "--requests=1200", "--concurrency=600")
			if err != nil {
				n.err = err
				return
			}
			n.bursts, n.requests, n.errors = n.bursts+1, n.requests+r.Requests, n.errors+r.Errors
			select {
			case <-stop:
				return
			default:
			}
		}
	}()

	c.forceRenewal(t)
	forced := time.Now()
	var renewed *corev1.Secret
	// The injectors look at their list every certificate check interval.
	retry.DoWithRetry(t, "the injector renews the peers' certificate", int(3*certCheckInterval/(2*time.Second)), 2*time.Second, func() (string, error) {
		var err error
		if renewed, err = secrets.Get(t.Context(), peersTLS, metav1.GetOptions{}); err != nil {
			return "", err
		}
		if serialOf(t, renewed.Data["tls.crt"]).Cmp(was) == 0 {
			return "", errors.New("not renewed yet")
		}
		return "", nil
	})
	want := serialOf(t, renewed.Data["tls.crt"])
	t.Logf("the injector renewed the peers' certificate %v after it was marked due", time.Since(forced).Round(time.Second))
	cert, err := tls.X509KeyPair(renewed.Data["tls.crt"], renewed.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	renewedAt := time.Now()
	for _, pod := range pods {
		tunnel := k8s.NewTunnel(c.kubectl, k8s.ResourceTypePod, pod.Name, 0, 50053)
		tunnel.ForwardPort(t)
		retry.DoWithRetry(t, "pod "+pod.Name+" serves the renewed certificate", int(renewalWait/(2*time.Second)), 2*time.Second, func() (string, error) {
			got, err := servedSerial(tunnel.Endpoint(), cert)
			if err == nil && got.Cmp(want) != 0 {
				err = fmt.Errorf("serves serial %x, the renewed one is %x", got, want)
			}
			return "", err
		})
		tunnel.Close()
		t.Logf("pod %s serves the renewed certificate, %v after the Secret's update", pod.Name, time.Since(renewedAt).Round(time.Second))
	}
	close(stop)
	n := endOf(t, done, "the bursts")
	if n.err != nil {
		t.Fatal(n.err)
	}
	t.Logf("during the renewal: %d bursts, %d calls, %d errors", n.bursts, n.requests, n.errors)
	if n.errors != 0 || n.bursts == 0 {
		t.Errorf("%d bursts with %d failed calls of %d; want at least one, and no failed call", n.bursts, n.errors, n.requests)
	}
	for _, pod := range waitForPods(t, c.kubectl, appSelector(peersApp), replicas) {
		for _, cs := range pod.Status.InitContainerStatuses {
			if cs.Name == sidecarName && cs.RestartCount > 0 {
				t.Errorf("the sidecar of pod %s restarted %d times: the renewal is to be read in place", pod.Name, cs.RestartCount)
			}
		}
	}
}

// servedSerial returns the serial number of the certificate the peer port
// at addr serves, to a client with cert (a peer's: the port asks for one).
func servedSerial(addr string, cert tls.Certificate) (*big.Int, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		Certificates:       []tls.Certificate{cert},
		NextProtos:         []string{"h2"}, // grpc-go's servers refuse a handshake without it
		InsecureSkipVerify: true,           // only the certificate served is read
	})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// serialOf returns the serial number of the PEM certificate pemCert.
func serialOf(t *testing.T, pemCert []byte) *big.Int {
	t.Helper()
	block, _ := pem.Decode(pemCert)
	if block == nil {
		t.Fatal("no PEM block in the certificate")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c.SerialNumber
}
