package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// schema is a JSON schema as decoded JSON.
type schema = map[string]any

const (
	refPrefix   = "#/definitions/"
	intOrString = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	quantity    = "io.k8s.apimachinery.pkg.api.resource.Quantity"
)

// gvk is one entry of x-kubernetes-group-version-kind.
type gvk struct {
	Group, Version, Kind string
}

// fileName is kubeconform's name for a kind's schema: the kind in lower case,
// then the first part of the group (none for the core group) and the version,
// e.g. deployment-apps-v1.json, service-v1.json, networkpolicy-networking-v1.json.
func (g gvk) fileName() string {
	name := strings.ToLower(g.Kind)
	if g.Group != "" {
		name += "-" + strings.ToLower(strings.Split(g.Group, ".")[0])
	}
	return name + "-" + strings.ToLower(g.Version) + ".json"
}

func (g gvk) apiVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// fromSwaggerFile converts every kind of a Kubernetes OpenAPI v2 document.
func fromSwaggerFile(path string) (map[string]schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Definitions map[string]schema `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fromSwagger(doc.Definitions)
}

// fromSwagger converts every definition that names its group, version and kind.
func fromSwagger(defs map[string]schema) (map[string]schema, error) {
	out := map[string]schema{}
	for name, def := range defs {
		raw, ok := def["x-kubernetes-group-version-kind"]
		if !ok {
			continue
		}
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, err
		}
		var gvks []gvk
		if err := json.Unmarshal(b, &gvks); err != nil {
			return nil, fmt.Errorf("%s: x-kubernetes-group-version-kind: %w", name, err)
		}
		for _, g := range gvks {
			s := inline(def, defs, map[string]bool{name: true}).(schema)
			pinKind(s, g)
			out[g.fileName()] = s
		}
	}
	return out, nil
}

// inline returns v with every $ref replaced by a strict copy of its
// definition. A reference back into a definition being inlined (a recursive
// type, such as JSONSchemaProps) becomes an open schema.
func inline(v any, defs map[string]schema, open map[string]bool) any {
	return rewrite(v, func(s schema) (any, bool) {
		ref, ok := s["$ref"].(string)
		if !ok {
			if s["format"] == "int-or-string" {
				return intOrStringSchema(), true
			}
			return nil, false
		}
		name := strings.TrimPrefix(ref, refPrefix)
		switch {
		case name == intOrString:
			return intOrStringSchema(), true
		case name == quantity:
			return schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "number"}}}, true
		case open[name]:
			return schema{}, true
		}
		def, ok := defs[name]
		if !ok {
			return schema{}, true
		}
		open[name] = true
		defer delete(open, name)
		return inline(def, defs, open), true
	})
}

// rewrite returns a strict copy of the schema v: every schema object in it
// is first offered to replace, which returns its replacement and true, or
// false to keep the object, whose fields are then rewritten in turn. The
// group-version-kind extension is dropped: a kind's file names it.
func rewrite(v any, replace func(schema) (any, bool)) any {
	switch v := v.(type) {
	case schema:
		if r, ok := replace(v); ok {
			return r
		}
		out := schema{}
		for k, x := range v {
			switch k {
			case "x-kubernetes-group-version-kind":
			case "properties": // a map of names to schemas, not a schema
				props := schema{}
				for name, p := range x.(schema) {
					props[name] = rewrite(p, replace)
				}
				out[k] = props
			default:
				out[k] = rewrite(x, replace)
			}
		}
		return strict(out)
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = rewrite(x, replace)
		}
		return out
	default:
		return v
	}
}

func intOrStringSchema() schema {
	return schema{"oneOf": []any{schema{"type": "string"}, schema{"type": "integer"}}}
}

// strict forbids fields a schema with properties does not declare, unless it
// says unknown fields are kept.
func strict(s schema) schema {
	if _, ok := s["properties"]; ok {
		if _, set := s["additionalProperties"]; !set && s["x-kubernetes-preserve-unknown-fields"] != true {
			s["additionalProperties"] = false
		}
	}
	return s
}

// pinKind makes apiVersion and kind take only the kind's own values.
func pinKind(s schema, g gvk) {
	props, ok := s["properties"].(schema)
	if !ok {
		return
	}
	props["apiVersion"] = schema{"type": "string", "enum": []any{g.apiVersion()}}
	props["kind"] = schema{"type": "string", "enum": []any{g.Kind}}
}

// fromCRDFile converts every served version of a CustomResourceDefinition.
func fromCRDFile(path string) (map[string]schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if crd.Spec.Names.Kind == "" || len(crd.Spec.Versions) == 0 {
		return nil, fmt.Errorf("%s: not a CustomResourceDefinition with versions", path)
	}
	out := map[string]schema{}
	for _, v := range crd.Spec.Versions {
		g := gvk{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		s := crdStrict(v.Schema.OpenAPIV3Schema).(schema)
		pinKind(s, g)
		out[g.fileName()] = s
	}
	return out, nil
}

// crdStrict applies strict to every object of a CRD's schema and turns
// x-kubernetes-int-or-string into a JSON schema choice.
func crdStrict(v any) any {
	return rewrite(v, func(s schema) (any, bool) {
		if s["x-kubernetes-int-or-string"] == true {
			return intOrStringSchema(), true
		}
		return nil, false
	})
}

// writeAll writes each schema to dir under its file name, sorted for stable output.
func writeAll(dir string, schemas map[string]schema) error {
	names := make([]string, 0, len(schemas))
	for name := range schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b, err := json.Marshal(schemas[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
