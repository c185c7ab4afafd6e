package methodkind

import (
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// methodsOf returns what files declare of every method of every service in
// them. The Requests come from one registry of all the files together, so
// that a file's imports resolve wherever in files they are. The registry
// leaves what no file declares unresolved rather than failing: a set built
// without its imports (protoc without --include_imports) still describes
// the requests that do not use them. When the files do not build at all
// (two declare one name, say), the kinds are still learned and every
// Request is nil.
func methodsOf(files []*descriptorpb.FileDescriptorProto) map[string]Method {
	// On error reg is nil, which finds no file.
	reg, _ := protodesc.FileOptions{AllowUnresolvable: true}.NewFiles(&descriptorpb.FileDescriptorSet{File: files})
	methods := map[string]Method{}
	for _, f := range files {
		built, _ := reg.FindFileByPath(f.GetName())
		addServices(methods, f, built)
	}
	return methods
}

// addServices records what f declares of every method of every service in
// it. built is f as a resolved descriptor, nil when it could not be built:
// it gives each method its Request.
func addServices(methods map[string]Method, f *descriptorpb.FileDescriptorProto, built protoreflect.FileDescriptor) {
	for _, s := range f.GetService() {
		var sd protoreflect.ServiceDescriptor
		if built != nil {
			sd = built.Services().ByName(protoreflect.Name(s.GetName()))
		}
		for _, m := range s.GetMethod() {
			methods["/"+serviceName(f, s)+"/"+m.GetName()] = Method{
				Kind:        kindOf(m.GetClientStreaming(), m.GetServerStreaming()),
				Idempotency: idempotencyOf(m.GetOptions().GetIdempotencyLevel()),
				Request:     requestOf(sd, m.GetName()),
			}
		}
	}
}

// serviceName returns the full name of s, a service declared in f.
func serviceName(f *descriptorpb.FileDescriptorProto, s *descriptorpb.ServiceDescriptorProto) string {
	if pkg := f.GetPackage(); pkg != "" {
		return pkg + "." + s.GetName()
	}
	return s.GetName()
}

// requestOf returns the request message of sd's method, nil when sd is nil,
// lacks the method, or does not resolve everything the message uses.
func requestOf(sd protoreflect.ServiceDescriptor, method string) protoreflect.MessageDescriptor {
	if sd == nil {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil || !resolved(md.Input(), map[protoreflect.FullName]bool{}) {
		return nil
	}
	return md.Input()
}

// resolved reports whether md and every message and enum its fields use,
// however deep, are known rather than placeholders for a file that was not
// given: whoever parses a request with md then has every field's type.
// seen holds the messages already checked (a message may contain itself).
func resolved(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if md.IsPlaceholder() {
		return false
	}
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if e := f.Enum(); e != nil && e.IsPlaceholder() {
			return false
		}
		if m := f.Message(); m != nil && !resolved(m, seen) {
			return false
		}
	}
	return true
}

// idempotencyOf maps a descriptor's idempotency_level to its Idempotency.
func idempotencyOf(l descriptorpb.MethodOptions_IdempotencyLevel) Idempotency {
	switch l {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return NoSideEffects
	case descriptorpb.MethodOptions_IDEMPOTENT:
		return Idempotent
	default:
		return Unannotated
	}
}
