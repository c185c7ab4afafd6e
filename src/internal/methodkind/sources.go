package methodkind

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// explicitKinds merges the explicit sources: the descriptor set at path (if
// any), the registered files (if any) and the unary method list. A listed
// method a descriptor declares streaming is an error: collapsing it would
// break its calls.
func explicitKinds(path string, files *protoregistry.Files, unary []string) (map[string]Method, error) {
	kinds := map[string]Method{}
	if path != "" {
		var err error
		if kinds, err = loadDescriptorSet(path); err != nil {
			return nil, err
		}
	}
	if files != nil {
		files.RangeFiles(func(f protoreflect.FileDescriptor) bool {
			addServices(kinds, protodesc.ToFileDescriptorProto(f), f)
			return true
		})
	}
	for i, m := range unary {
		if err := ValidateMethod(m); err != nil {
			return nil, fmt.Errorf("methodkind: UnaryMethods[%d] %q: %w", i, m, err)
		}
		if k, ok := kinds[m]; ok && k.Kind != Unary {
			return nil, fmt.Errorf("methodkind: UnaryMethods[%d] %q: its descriptor declares it %s", i, m, k.Kind)
		}
		if _, ok := kinds[m]; !ok {
			kinds[m] = Method{Kind: Unary}
		}
	}
	return kinds, nil
}

// loadDescriptorSet reads what a binary FileDescriptorSet (protoc
// --descriptor_set_out, buf build -o x.binpb) declares of all its methods.
func loadDescriptorSet(path string) (map[string]Method, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("methodkind: read descriptor set: %w", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("methodkind: descriptor set %s is not a binary FileDescriptorSet: %w", path, err)
	}
	kinds := methodsOf(set.GetFile())
	if len(kinds) == 0 {
		return nil, fmt.Errorf("methodkind: descriptor set %s declares no service methods", path)
	}
	return kinds, nil
}

// ValidateMethod accepts a full method name "/pkg.Service/Method" (the package
// is optional): proto identifiers, dot-separated in the service name.
func ValidateMethod(m string) error {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	if !ok || !strings.HasPrefix(m, "/") {
		return errors.New(`want "/package.Service/Method"`)
	}
	for part := range strings.SplitSeq(svc, ".") {
		if !isIdent(part) {
			return fmt.Errorf("service name %q is not a dot-separated proto name", svc)
		}
	}
	if !isIdent(method) {
		return fmt.Errorf("method name %q is not a proto identifier", method)
	}
	return nil
}

// isIdent reports whether s is a proto identifier: a letter or '_', then
// letters, digits or '_'.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
