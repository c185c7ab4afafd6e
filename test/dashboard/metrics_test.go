package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

const (
	// defaultTestTimeout bounds every wait on the running binaries.
	defaultTestTimeout = 30 * time.Second
	// pollInterval paces the checks for a metric to appear.
	pollInterval = 50 * time.Millisecond
	// sayHelloMethod is the unary method the test calls through the sidecar.
	sayHelloMethod = hellov1.Greeter_SayHello_FullMethodName
	// concurrentCalls identical SayHello calls are sent at once so that the
	// sidecar collapses them.
	concurrentCalls = 8
	// streamMessages is how many replies the test's StreamHellos call reads.
	streamMessages = 3
)

// replayPolicy is the sidecar's policy file: StreamHellos replayed, so that
// the stream series exist.
const replayPolicy = "methods:\n" +
	"  - name: " + hellov1.Greeter_StreamHellos_FullMethodName + "\n" +
	"    stream: replay\n"

func TestDashboard_EveryMetricIsExportedByTheSidecarTheBackendOrTheInjector(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the collapser, hello-backend and collapser-injector binaries")
	}
	bin := buildBinaries(t)
	helloAddr, helloMetrics := freeAddr(t), freeAddr(t)
	sidecarAddr, sidecarMetrics, peerAddr := freeAddr(t), freeAddr(t), freeAddr(t)
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(replayPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	// Peers need the release's peer token; with it the sidecar holds leases.
	tokenFile := filepath.Join(t.TempDir(), "peer-token")
	if err := os.WriteFile(tokenFile, []byte("dashboard-test-token-0123456789abcdefgh"), 0o600); err != nil {
		t.Fatal(err)
	}
	startProcess(t, filepath.Join(bin, "hello-backend"),
		"--listen", helloAddr, "--metrics-listen", helloMetrics, "--latency", "50ms")
	// The sidecar is its own only peer: it forwards every collapsed call to
	// itself as the key's owner, so the peer series exist; the policy
	// replays StreamHellos, so the stream series do.
	startProcess(t, filepath.Join(bin, "collapser"),
		"--listen", sidecarAddr, "--backend", helloAddr, "--metrics-listen", sidecarMetrics,
		"--collapse-methods", sayHelloMethod,
		"--peers", peerAddr, "--peer-listen", peerAddr, "--peer-token-file", tokenFile, "--peer-plaintext", "--policy-file", policyFile)

	injectorMetrics := startInjector(t, bin)

	ctx, cancel := context.WithTimeout(context.Background(), defaultTestTimeout)
	defer cancel()
	callThroughSidecar(ctx, t, sidecarAddr)

	selectors := dashboardSelectors(t)
	want := usedMetrics(selectors)
	// A family shows up once it has a series, and the counters are updated as
	// the calls finish: scrape until every metric the dashboard reads is
	// there, or the wait ends.
	var sidecarFamilies, helloFamilies, injectorFamilies map[string]*dto.MetricFamily
	var exported map[string]family
	err := poll(ctx, func() error {
		var err error
		if sidecarFamilies, err = scrape(ctx, sidecarMetrics); err != nil {
			return err
		}
		if helloFamilies, err = scrape(ctx, helloMetrics); err != nil {
			return err
		}
		if injectorFamilies, err = scrape(ctx, injectorMetrics); err != nil {
			return err
		}
		exported = summarize(sidecarFamilies, helloFamilies, injectorFamilies)
		var missing []string
		for _, name := range want {
			if familyOf(name, exported) == "" {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %v", missing)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the dashboard reads metrics that none of the sidecar, the backend and the injector exports: %v", err)
	}

	t.Run("every label the dashboard matches on exists", func(t *testing.T) {
		for _, s := range selectors {
			f := exported[familyOf(s.metric, exported)]
			for _, m := range s.matchers {
				if !f.labels[m.Name] && !(m.Name == model.BucketLabel && f.typ == dto.MetricType_HISTOGRAM) {
					t.Errorf("%s: %s has no label %q (labels: %v)", s.where, s.metric, m.Name, sortedKeys(f.labels))
				}
			}
		}
	})

	t.Run("every metric with a method label is filtered by the method variable", func(t *testing.T) {
		for _, s := range selectors {
			f := exported[familyOf(s.metric, exported)]
			if !f.labels["method"] || s.where == "variable "+methodVariable {
				continue
			}
			if !slices.ContainsFunc(s.matchers, isMethodFilter) {
				t.Errorf("%s: %s has a method label but the selector lacks method=~\"$%s\"", s.where, s.metric, methodVariable)
			}
		}
	})

	t.Run("every sidecar and injector metric has a panel", func(t *testing.T) {
		for binary, families := range map[string]map[string]*dto.MetricFamily{"sidecar": sidecarFamilies, "injector": injectorFamilies} {
			for name := range families {
				if !strings.HasPrefix(name, "collapser_") {
					continue
				}
				if !slices.ContainsFunc(want, func(used string) bool { return familyOf(used, exported) == name }) {
					t.Errorf("the %s exports %s but no panel reads it", binary, name)
				}
			}
		}
	})

	t.Run("the method variable lists every method the sidecar counts", func(t *testing.T) {
		listed := methodVariableSource(t).values(sidecarFamilies)
		for name, mf := range sidecarFamilies {
			for method := range labelValues(mf, "method") {
				if !listed[method] && name != "collapser_method_rule_info" {
					t.Errorf("%s counts method %q, but the %s variable lists only %v", name, method, methodVariable, sortedKeys(listed))
				}
			}
		}
	})

	t.Run("the backend's method values match the sidecar's", func(t *testing.T) {
		// The comparison panel filters hello_requests_total by values taken
		// from collapser_requests_total: both must name methods alike.
		sidecar := labelValues(sidecarFamilies["collapser_requests_total"], "method")
		backend := labelValues(helloFamilies["hello_requests_total"], "method")
		if !sidecar[sayHelloMethod] || !backend[sayHelloMethod] {
			t.Errorf("method %q: in collapser_requests_total %v, in hello_requests_total %v", sayHelloMethod, sortedKeys(sidecar), sortedKeys(backend))
		}
	})
}

// isMethodFilter reports whether m is method=~"$method".
func isMethodFilter(m *labels.Matcher) bool {
	return m.Name == "method" && m.Type == labels.MatchRegexp && m.Value == variableValue(methodVariable)
}

// callThroughSidecar sends concurrentCalls identical SayHello calls (their
// leader's call forwarded to the owner, the sidecar itself) and one
// replayed StreamHellos call through the sidecar at addr, waiting for it to
// be ready, so every labelled series exists.
func callThroughSidecar(ctx context.Context, t *testing.T, addr string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial sidecar %s: %v", addr, err)
	}
	defer conn.Close()
	client := hellov1.NewGreeterClient(conn)
	var g errgroup.Group
	for range concurrentCalls {
		g.Go(func() error {
			_, err := client.SayHello(ctx, &hellov1.HelloRequest{Name: "dashboard"}, grpc.WaitForReady(true))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("SayHello through the sidecar: %v", err)
	}
	if n, err := streamHellos(ctx, client); err != nil || n != streamMessages {
		t.Fatalf("StreamHellos through the sidecar: %d of %d replies, %v", n, streamMessages, err)
	}
}

// streamHellos reads one StreamHellos call of streamMessages replies to its
// end and returns how many replies came.
func streamHellos(ctx context.Context, client hellov1.GreeterClient) (int, error) {
	stream, err := client.StreamHellos(ctx, &hellov1.HelloRequest{Name: "dashboard", Count: streamMessages}, grpc.WaitForReady(true))
	if err != nil {
		return 0, err
	}
	for n := 0; ; n++ {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return n, nil
			}
			return n, err
		}
	}
}

// poll calls check every pollInterval until it returns nil or ctx ends; then
// it returns the last error check returned before ctx ended (a check cut
// short by the end of ctx would only report the deadline).
func poll(ctx context.Context, check func() error) error {
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	var last error
	for {
		err := check()
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up after %v)", last, defaultTestTimeout)
		case <-ticker.C:
		}
	}
}
