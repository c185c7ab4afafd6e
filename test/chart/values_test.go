package chart

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// schemaNode is the part of values.schema.json this test walks.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
	Definitions          map[string]*schemaNode `json:"definitions"`
}

// wholeShapes are the schema definitions of objects passed through as they are:
// Kubernetes objects copied into the manifests, cert-manager's issuer reference, and
// the sidecar's policy (which the sidecar validates). values.yaml documents them as a whole, not field by field.
var wholeShapes = map[string]bool{
	"resources":          true,
	"probe":              true,
	"podSecurityContext": true,
	"securityContext":    true,
	"policy":             true,
	"issuerRef":          true,
}

// resolve follows a "#/definitions/x" reference.
func (s *schemaNode) resolve(root *schemaNode) *schemaNode {
	if name, ok := strings.CutPrefix(s.Ref, "#/definitions/"); ok {
		return root.Definitions[name]
	}
	return s
}

func TestValues_EveryKeyIsDocumentedAndDeclaredInTheSchema(t *testing.T) {
	var root schemaNode
	if err := json.Unmarshal(readChartFile(t, "values.schema.json"), &root); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(readChartFile(t, "values.yaml"), &doc); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	walkValues(t, &root, &root, doc.Content[0], "")
}

// walkValues checks a values.yaml mapping against its schema: every key has a comment
// above it and is a declared property; objects the chart defines (not Kubernetes
// types passed through, such as resources or probes) are checked key by key, and must
// reject unknown keys.
func walkValues(t *testing.T, root, schema *schemaNode, mapping *yamlv3.Node, path string) {
	t.Helper()
	if schema.AdditionalProperties != false {
		t.Errorf("schema of %q does not set additionalProperties: false", "/"+path)
	}
	var keys []string
	for i := 0; i+1 < len(mapping.Content); i += 2 {
		key, value := mapping.Content[i], mapping.Content[i+1]
		keyPath := strings.TrimPrefix(path+"."+key.Value, ".")
		keys = append(keys, key.Value)
		if strings.TrimSpace(key.HeadComment) == "" {
			t.Errorf("values.yaml: %s (line %d) has no comment above it", keyPath, key.Line)
		}
		prop, ok := schema.Properties[key.Value]
		if !ok {
			t.Errorf("values.yaml: %s is not declared in values.schema.json", keyPath)
			continue
		}
		def := strings.TrimPrefix(prop.Ref, "#/definitions/")
		if resolved := prop.resolve(root); resolved.Properties != nil && value.Kind == yamlv3.MappingNode && !wholeShapes[def] {
			walkValues(t, root, resolved, value, keyPath)
		}
	}
	for name := range schema.Properties {
		if name != "global" && !slices.Contains(keys, name) {
			t.Errorf("values.schema.json declares %s, which values.yaml lacks", strings.TrimPrefix(path+"."+name, "."))
		}
	}
}
