package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/gruntwork-io/terratest/modules/k8s"
	"github.com/gruntwork-io/terratest/modules/retry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// renewalWait bounds the wait for every sidecar to serve a renewed
// certificate: the kubelet updates a Secret's volume within its sync
// period and cache TTL (about a minute each), and the sidecar reads its
// files again every 10 s. A wait for a busy machine, not a bound.
const renewalWait = 5 * time.Minute

// peerRenewal renews the injected peers' certificate in place, as
// cert-manager does (a new certificate and key of the same identity, from
// the same CA, in the same Secret), while bursts of distinct keys run over
// the three replicas (two thirds of their calls cross pods, over mutual
// TLS): no call of any burst fails, and each sidecar serves the renewed
// certificate on its peer port without a restart.
func (c *injectorChecks) peerRenewal(t *testing.T) {
	ns := c.kubectl.Namespace
	pods := waitForPods(t, c.kubectl, appSelector(peersApp), replicas)
	renewed := peerTLSSecret(t, c.peersCA, peersTLS, ns)
	want := serialOf(t, renewed.Data["tls.crt"])
	probe := issuePeer(t, c.peersCA, peersTLS, ns)
	cert, err := tls.LoadX509KeyPair(probe.Cert, probe.Key)
	if err != nil {
		t.Fatal(err)
	}

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

	secret, err := c.client.CoreV1().Secrets(ns).Get(t.Context(), peersTLS, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data = renewed.Data
	if _, err := c.client.CoreV1().Secrets(ns).Update(t.Context(), secret, metav1.UpdateOptions{}); err != nil {
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
