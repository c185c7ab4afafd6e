package config

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// chartSets are the flags the chart's templates set themselves, not from
// collapser.config.
var chartSets = map[string]bool{"listen": true, "metrics-listen": true, "policy-file": true, "peers": true, "replicas": true, "peer-listen": true, "peer-token-file": true, "peer-tls-cert-file": true, "peer-tls-key-file": true, "peer-tls-ca-file": true, "peer-plaintext": true, "memory-limit": true}

// chartDiffers are the settings whose chart default deliberately differs
// from the binary's, and why.
var chartDiffers = map[string]string{
	"backend": "empty: the chart points the sidecar at the backend container on loopback",
}

// TestChartValues_SidecarSettingsMatchTheFlags keeps charts/collapser's
// collapser.config true: each key is the variable the chart's sidecar
// template sets from it and its comment names, a setting of the binary,
// defaults to the binary's default, and every setting has a value.
func TestChartValues_SidecarSettingsMatchTheFlags(t *testing.T) {
	data, err := os.ReadFile("../../../charts/collapser/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	values := lookup(lookup(root.Content[0], "collapser"), "config")
	if values == nil {
		t.Fatal("values.yaml has no collapser.config")
	}
	env := regexp.MustCompile(`\((COLLAPSER_[A-Z_]+)\)`)
	seen := map[string]bool{}
	for i := 0; i+1 < len(values.Content); i += 2 {
		key, val := values.Content[i], values.Content[i+1]
		m := env.FindStringSubmatch(key.HeadComment)
		if m == nil {
			t.Errorf("values.yaml collapser.config.%s: its comment names no COLLAPSER_ variable", key.Value)
			continue
		}
		// The chart's template names each variable after its key.
		if derived := EnvPrefix + upperSnake(key.Value); derived != m[1] {
			t.Errorf("values.yaml collapser.config.%s: the chart sets %s from it, its comment names %s", key.Value, derived, m[1])
		}
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(m[1], EnvPrefix), "_", "-"))
		c := Default()
		f := flagSet(&c).Lookup(name)
		if f == nil {
			t.Errorf("values.yaml collapser.config.%s: %s is no setting of the sidecar", key.Value, m[1])
			continue
		}
		seen[name] = true
		if _, ok := chartDiffers[name]; ok {
			continue
		}
		if got := chartValue(val); !strings.EqualFold(got, f.DefValue) {
			t.Errorf("values.yaml collapser.config.%s = %q, the sidecar's default is %q", key.Value, got, f.DefValue)
		}
	}
	c := Default()
	flagSet(&c).VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] && !chartSets[f.Name] {
			t.Errorf("values.yaml collapser.config has no value for --%s (%s)", f.Name, EnvName(f.Name))
		}
	})
}

// lookup returns the value of key in the mapping n, nil if absent.
func lookup(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// chartValue renders a value as the flag's default prints: a list as its
// comma-joined items.
func chartValue(n *yaml.Node) string {
	if n.Kind != yaml.SequenceNode {
		return n.Value
	}
	items := make([]string, len(n.Content))
	for i, c := range n.Content {
		items[i] = fmt.Sprint(c.Value)
	}
	return strings.Join(items, ",")
}

// upperSnake is Helm's snakecase, upper-cased: the name the chart's sidecar
// template (collapser.sidecarContainer) gives a collapser.config key's
// variable. A word starts at an upper-case letter after a lower-case one or
// a digit, and at the last letter of an upper-case run followed by a
// lower-case one: cacheTTL is CACHE_TTL, maxRecvMsgBytes MAX_RECV_MSG_BYTES.
func upperSnake(key string) string {
	r := []rune(key)
	var b strings.Builder
	for i, c := range r {
		if i > 0 && unicode.IsUpper(c) {
			prev := r[i-1]
			nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
			if unicode.IsLower(prev) || unicode.IsDigit(prev) || unicode.IsUpper(prev) && nextLower {
				b.WriteByte('_')
			}
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}

func TestUpperSnake_NamesLikeHelmsSnakecase(t *testing.T) {
	for key, want := range map[string]string{
		"backend": "BACKEND", "cacheTTL": "CACHE_TTL", "maxRecvMsgBytes": "MAX_RECV_MSG_BYTES",
		"unsafeShareAcrossCredentials": "UNSAFE_SHARE_ACROSS_CREDENTIALS", "httpServerTTL": "HTTP_SERVER_TTL", "grpcHTTPPort": "GRPC_HTTP_PORT",
	} {
		if got := upperSnake(key); got != want {
			t.Errorf("upperSnake(%q) = %q, want %q", key, got, want)
		}
	}
}
