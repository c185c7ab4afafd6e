package collapse_test

import (
	"context"
	"fmt"
	"time"

	"github.com/collapser/collapser/src/internal/collapse"
)

func Example() {
	g := collapse.New(collapse.Options[string]{TTL: 100 * time.Millisecond})
	defer g.Close()

	load := func() (string, error) { return "answer", nil }
	v, outcome, err := g.Do(context.Background(), "/hello.v1.Greeter/SayHello", load)
	fmt.Println(v, outcome, err)
	v, outcome, err = g.Do(context.Background(), "/hello.v1.Greeter/SayHello", load)
	fmt.Println(v, outcome, err)
	// Output:
	// answer leader <nil>
	// answer cache_hit <nil>
}
