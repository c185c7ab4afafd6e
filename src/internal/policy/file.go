package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"

	"github.com/collapser/collapser/src/internal/methodkind"
)

// fileSpec is the policy file's shape.
type fileSpec struct {
	Default ruleSpec     `yaml:"default"`
	Methods []methodSpec `yaml:"methods"`
}

// methodSpec is one entry of the file's methods list.
type methodSpec struct {
	Name     scalar `yaml:"name"`
	ruleSpec `yaml:",inline"`
}

// ruleSpec holds the fields a rule may set; an absent field is inherited.
type ruleSpec struct {
	Collapse             scalar    `yaml:"collapse"`
	CacheTTL             scalar    `yaml:"cacheTTL"`
	StaleWhileRevalidate scalar    `yaml:"staleWhileRevalidate"`
	StaleIfError         scalar    `yaml:"staleIfError"`
	StaleIfErrorCodes    *[]scalar `yaml:"staleIfErrorCodes"`
	FinishAbandoned      scalar    `yaml:"finishAbandoned"`
	Timeout              scalar    `yaml:"timeout"`
	Stream               scalar    `yaml:"stream"`
	MaxTTL               scalar    `yaml:"maxTTL"`
	CacheControl         scalar    `yaml:"cacheControl"`
	CacheCodes           *[]scalar `yaml:"cacheCodes"`
	CacheCodesTTL        scalar    `yaml:"cacheCodesTTL"`
	MaxWaiters           scalar    `yaml:"maxWaiters"`
	WaitTimeout          scalar    `yaml:"waitTimeout"`
	TTLJitter            scalar    `yaml:"ttlJitter"`
	EarlyRefresh         scalar    `yaml:"earlyRefresh"`
	// KeyIgnoreFields is set on a method's own entry only (checked by
	// parseFile): field paths are a request message's.
	KeyIgnoreFields *[]scalar `yaml:"keyIgnoreFields"`
	// Invalidates is set on a method's own entry only (checked by parseFile).
	Invalidates *invalidatesSpec `yaml:"invalidates"`
}

// invalidatesSpec names what the success of a write takes back.
type invalidatesSpec struct {
	Methods      []scalar `yaml:"methods"`
	ResponseTags scalar   `yaml:"responseTags"`
}

// scalar is one YAML scalar as written, with its line, so that validation
// can name what is wrong and where.
type scalar struct {
	set   bool
	value string
	line  int
}

// UnmarshalYAML implements yaml.Unmarshaler: it keeps the scalar's text
// whatever its tag (true, 100ms and UNAVAILABLE alike).
func (s *scalar) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a single value, got a %s", n.Line, kindName(n.Kind))
	}
	*s = scalar{set: true, value: n.Value, line: n.Line}
	return nil
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "map"
	default:
		return "YAML node"
	}
}

// parseFile decodes a policy file strictly (unknown fields are errors) and
// checks every entry. Errors name the file, the entry and the field.
func parseFile(name string, data []byte) (*fileSpec, error) {
	var f fileSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("policy file %s: %w", name, err)
	}
	var errs []error
	errs = append(errs, f.Default.check("default")...)
	if f.Default.Invalidates != nil {
		errs = append(errs, errors.New("default: invalidates: only a method's own entry may name what its success invalidates"))
	}
	if f.Default.KeyIgnoreFields != nil {
		errs = append(errs, errors.New("default: keyIgnoreFields: only a method's own entry may name fields of its request"))
	}
	seen := map[string]string{} // normalised name → the entry that named it
	for i, m := range f.Methods {
		where := fmt.Sprintf("methods[%d]", i)
		norm, err := normalizeName(m.Name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: name: %w", where, err))
		} else {
			where = fmt.Sprintf("methods[%d] (%s)", i, m.Name.value)
			if first, dup := seen[norm]; dup {
				errs = append(errs, fmt.Errorf("%s: name: %s is already named by %s", at(m.Name, where), norm, first))
			}
			seen[norm] = where
		}
		errs = append(errs, m.check(where)...)
		if m.KeyIgnoreFields != nil && strings.HasSuffix(norm, "/*") {
			errs = append(errs, fmt.Errorf("%s: keyIgnoreFields: only a method's own entry may name fields of its request, not a whole service's", at(m.Name, where)))
		}
		switch {
		case m.Invalidates == nil:
		case strings.HasSuffix(norm, "/*"):
			errs = append(errs, fmt.Errorf("%s: invalidates: only a method's own entry may name what its success invalidates, not a whole service's", at(m.Name, where)))
		case m.Collapse.value == "true":
			errs = append(errs, fmt.Errorf("%s: invalidates: a method whose success invalidates answers is a write, which passes through: drop collapse: true", at(m.Collapse, where)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy file %s: %w", name, err)
	}
	return &f, nil
}

// at prefixes where with the scalar's line.
func at(s scalar, where string) string {
	return fmt.Sprintf("line %d: %s", s.line, where)
}

// normalizeName checks an entry's name and returns it in canonical form:
// "/pkg.Service/Method" for a method, "pkg.Service/*" for a service.
func normalizeName(s scalar) (string, error) {
	if !s.set || s.value == "" {
		return "", errors.New(`missing: want "/package.Service/Method" or "package.Service/*"`)
	}
	if svc, ok := strings.CutSuffix(strings.TrimPrefix(s.value, "/"), "/*"); ok {
		// Check the service part with a stand-in method name.
		if err := methodkind.ValidateMethod("/" + svc + "/M"); err != nil {
			return "", fmt.Errorf("line %d: %q: service name %q is not a dot-separated proto name", s.line, s.value, svc)
		}
		return svc + "/*", nil
	}
	if err := methodkind.ValidateMethod(s.value); err != nil {
		return "", fmt.Errorf(`line %d: %q: %w (or "package.Service/*" for a whole service)`, s.line, s.value, err)
	}
	return s.value, nil
}

// parseCollapse reads a collapse field: auto, true or false.
func parseCollapse(s string) (Mode, error) {
	switch s {
	case "auto":
		return Auto, nil
	case "true":
		return Always, nil
	case "false":
		return Never, nil
	}
	return 0, errors.New("want auto, true or false")
}

// parseDuration reads a non-negative Go duration ("250ms", "2s", "0").
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New(`want a duration such as "250ms" or "2s"`)
	}
	if d < 0 {
		return 0, errors.New("must not be negative")
	}
	return d, nil
}

// parseCode reads a gRPC status code name as the gRPC spec writes it
// ("UNAVAILABLE", "DEADLINE_EXCEEDED").
func parseCode(s string) (codes.Code, error) {
	var c codes.Code
	if err := c.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil || s == "OK" || strings.ToUpper(s) != s {
		return 0, errors.New("want a gRPC status code name such as UNAVAILABLE or DEADLINE_EXCEEDED")
	}
	return c, nil
}

// failures are the codes that say a call failed rather than what its answer
// is: the next call may well succeed, so they are never kept as answers.
var failures = setOf([]codes.Code{
	codes.Canceled, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted,
	codes.Aborted, codes.Internal, codes.Unavailable, codes.DataLoss,
})

// parseCacheCode reads a cacheCodes entry: a code that answers, such as
// NOT_FOUND, and not one that says the call failed.
func parseCacheCode(s string) (codes.Code, error) {
	c, err := parseCode(s)
	if err == nil && failures.has(c) {
		err = fmt.Errorf("%s says the call failed, not what its answer is: it is never kept (want a code such as NOT_FOUND)", s)
	}
	return c, err
}

// parseCount reads a non-negative whole number.
func parseCount(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, errors.New("want a whole number, 0 or more")
	}
	return n, nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, errors.New("want true or false")
}

// parseJitter reads a ttlJitter field: a fraction, from 0 up to 1.
func parseJitter(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f >= 1 {
		return 0, errors.New("want a fraction of the TTL, at least 0 and under 1, such as 0.1")
	}
	return f, nil
}

// parseStream reads a stream field: passthrough or replay.
func parseStream(s string) (StreamMode, error) {
	switch s {
	case "passthrough":
		return StreamPassthrough, nil
	case "replay":
		return StreamReplay, nil
	}
	return 0, errors.New("want passthrough or replay")
}

// ParseCacheControl reads a cacheControl setting, of the policy file or
// of the default rule's flag: honor or ignore. It returns whether to
// ignore an answer's cache-control.
func ParseCacheControl(s string) (bool, error) {
	switch s {
	case "honor":
		return false, nil
	case "ignore":
		return true, nil
	}
	return false, errors.New("want honor or ignore")
}

// compile checks an invalidates field of the entry where and returns what
// it says.
func (v *invalidatesSpec) compile(where string) (*Invalidation, []error) {
	inv := &Invalidation{}
	var errs []error
	for i, m := range v.Methods {
		if err := methodkind.ValidateMethod(m.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: invalidates.methods[%d] %q: %w", at(m, where), i, m.value, err))
			continue
		}
		inv.Methods = append(inv.Methods, m.value)
	}
	if v.ResponseTags.set {
		b, err := parseBool(v.ResponseTags.value)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: invalidates.responseTags %q: %w", at(v.ResponseTags, where), v.ResponseTags.value, err))
		}
		inv.ResponseTags = b
	}
	if len(errs) == 0 && len(inv.Methods) == 0 && !inv.ResponseTags {
		errs = append(errs, fmt.Errorf("%s: invalidates: names nothing: list methods, or set responseTags: true", where))
	}
	return inv, errs
}
