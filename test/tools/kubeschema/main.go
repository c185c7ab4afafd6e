// Command kubeschema writes JSON schemas for kubeconform without a network:
// one file per Kubernetes kind from the API's OpenAPI v2 document
// (api/openapi-spec/swagger.json of the k8s.io/kubernetes module), and one per
// CustomResourceDefinition version given, in kubeconform's own layout
// ({kind}-{group}-{version}.json, "standalone-strict": every $ref inlined, no
// unknown field allowed).
//
//	go run ./tools/kubeschema -swagger swagger.json -crd servicemonitors.yaml -out DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "kubeschema:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	var (
		swagger, out string
		crds         []string
	)
	fs := flag.NewFlagSet("kubeschema", flag.ContinueOnError)
	fs.StringVar(&swagger, "swagger", "", "`path` of the Kubernetes OpenAPI v2 document (swagger.json)")
	fs.Func("crd", "`path` of a CustomResourceDefinition YAML file (repeatable)", func(v string) error { crds = append(crds, v); return nil })
	fs.StringVar(&out, "out", "", "`directory` to write the schemas into")
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if swagger == "" || out == "" {
		return errors.New("-swagger and -out are required")
	}
	schemas, err := fromSwaggerFile(swagger)
	if err != nil {
		return err
	}
	for _, path := range crds {
		s, err := fromCRDFile(path)
		if err != nil {
			return err
		}
		for name, schema := range s {
			schemas[name] = schema
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := writeAll(out, schemas); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "kubeschema: %d schemas in %s\n", len(schemas), out)
	return nil
}
