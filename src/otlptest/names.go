package otlptest

import "github.com/collapser/collapser/src/internal/proxy"

// The names the sidecar gives its own parts of a trace (package proxy), for
// the tests of the test/ module, which cannot import internal packages.
const (
	// OutcomeAttribute is the attribute of a caller's server span that says
	// how its call was served.
	OutcomeAttribute = string(proxy.OutcomeAttribute)
	// CallSpanName names the span of the one call that answered a flight's
	// callers.
	CallSpanName = proxy.CallSpanName
)
