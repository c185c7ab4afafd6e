package otlptest

import (
	"context"
	"testing"

	"github.com/collapser/collapser/src/internal/tracing"
)

// NewTracing returns the Tracing the environment configures (Setenv points
// it here), shut down when the test ends: its last spans are exported
// before the receiver, started earlier, stops.
func NewTracing(t testing.TB, o tracing.Options) *tracing.Tracing {
	t.Helper()
	tr, err := tracing.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tr
}
