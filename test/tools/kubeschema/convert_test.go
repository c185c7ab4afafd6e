package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestFileName_IsKubeconformsLayout(t *testing.T) {
	tests := []struct {
		g    gvk
		want string
	}{
		{gvk{"", "v1", "Service"}, "service-v1.json"},
		{gvk{"apps", "v1", "Deployment"}, "deployment-apps-v1.json"},
		{gvk{"networking.k8s.io", "v1", "NetworkPolicy"}, "networkpolicy-networking-v1.json"},
		{gvk{"monitoring.coreos.com", "v1", "ServiceMonitor"}, "servicemonitor-monitoring-v1.json"},
	}
	for _, tt := range tests {
		if got := tt.g.fileName(); got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.g, got, tt.want)
		}
	}
}

func TestFromSwagger_InlinesRefsStrictlyAndOpensRecursion(t *testing.T) {
	var defs map[string]schema
	if err := json.Unmarshal([]byte(`{
		"x.Thing": {"type": "object", "x-kubernetes-group-version-kind": [{"group": "x", "version": "v1", "kind": "Thing"}],
			"properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
				"port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
				"node": {"$ref": "#/definitions/x.Node"}}},
		"x.Node": {"type": "object", "properties": {"child": {"$ref": "#/definitions/x.Node"}, "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}}}}
	}`), &defs); err != nil {
		t.Fatal(err)
	}
	got, err := fromSwagger(defs)
	if err != nil {
		t.Fatal(err)
	}
	var want schema
	if err := json.Unmarshal([]byte(`{"type": "object", "additionalProperties": false, "properties": {
		"apiVersion": {"type": "string", "enum": ["x/v1"]}, "kind": {"type": "string", "enum": ["Thing"]},
		"port": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
		"node": {"type": "object", "additionalProperties": false, "properties": {"child": {},
			"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}}}}}}`), &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !reflect.DeepEqual(got["thing-x-v1.json"], want) {
		b, _ := json.Marshal(got)
		t.Errorf("schemas = %s\nwant thing-x-v1.json = %v", b, want)
	}
}
