package mdsize_test

import (
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc/metadata"

	"github.com/collapser/collapser/src/internal/mdsize"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOf(t *testing.T) {
	tests := []struct {
		name string
		md   metadata.MD
		want int64
	}{
		{"nil", nil, 0},
		{"an entry without values", metadata.MD{"x": nil}, 64 + 1},
		{"names, values and their overheads", metadata.Pairs("ab", "cde", "ab", "f", "g", "hi"), (64 + 2 + 16 + 3 + 16 + 1) + (64 + 1 + 16 + 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mdsize.Of(tt.md); got != tt.want {
				t.Errorf("Of(%v) = %d, want %d", tt.md, got, tt.want)
			}
		})
	}
}
