package envflag

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/collapser/collapser/src/internal/testkit"
)

func TestApply_VariablesSetFlagsAndCommandLineWins(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	ttl := fs.Duration("cache-ttl", time.Second, "")
	addr := fs.String("listen", ":1", "")
	env := map[string]string{"P_CACHE_TTL": "5s", "P_LISTEN": ":2"}
	if err := Apply(fs, "P_", testkit.Env(env)); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--listen=:3"}); err != nil {
		t.Fatal(err)
	}
	if *ttl != 5*time.Second || *addr != ":3" {
		t.Errorf("cache-ttl = %v, listen = %q; want 5s from the variable, :3 from the command line", *ttl, *addr)
	}
}

func TestApply_BadValuesAreNamed(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Duration("a-b", 0, "")
	fs.Int("c", 0, "")
	env := map[string]string{"X_A_B": "soon", "X_C": "many"}
	err := Apply(fs, "X_", testkit.Env(env))
	if err == nil || !strings.Contains(err.Error(), `X_A_B="soon"`) || !strings.Contains(err.Error(), `X_C="many"`) {
		t.Errorf("Apply() = %v, want errors naming X_A_B and X_C", err)
	}
}

func TestName(t *testing.T) {
	if got := Name("HELLO_", "metrics-listen"); got != "HELLO_METRICS_LISTEN" {
		t.Errorf("Name = %q", got)
	}
}

func TestUsage_NamesTheVariables(t *testing.T) {
	fs := flag.NewFlagSet("prog", flag.ContinueOnError)
	fs.Duration("cache-ttl", time.Second, "how long")
	var out strings.Builder
	fs.SetOutput(&out)
	Usage(fs, "P_", "cache-ttl")()
	for _, want := range []string{"Usage: prog [flags]", "(--cache-ttl: P_CACHE_TTL)", "how long"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, out.String())
		}
	}
}

func TestApply_ASetButEmptyVariableSetsTheEmptyValue(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	addr := fs.String("admin-listen", "127.0.0.1:1", "")
	fs.Duration("cache-ttl", time.Second, "")
	err := Apply(fs, "P_", testkit.Env(map[string]string{"P_ADMIN_LISTEN": "", "P_CACHE_TTL": ""}))
	if *addr != "" {
		t.Errorf("admin-listen = %q, want empty: the variable is set, to nothing", *addr)
	}
	if err == nil || !strings.Contains(err.Error(), `P_CACHE_TTL="": set but empty, which --cache-ttl does not take`) {
		t.Errorf("Apply() = %v, want P_CACHE_TTL refused, named", err)
	}
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	addr = fs.String("admin-listen", "127.0.0.1:1", "")
	if err := Apply(fs, "P_", testkit.Env(nil)); err != nil || *addr != "127.0.0.1:1" {
		t.Errorf("unset: admin-listen = %q, %v; want its default", *addr, err)
	}
}
