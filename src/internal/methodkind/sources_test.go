package methodkind

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	hellov1 "github.com/collapser/collapser/src/api/hello/v1"
)

// helloFile returns the descriptor of hello.proto; edit may change it.
func helloFile(edit func(*descriptorpb.FileDescriptorProto)) *descriptorpb.FileDescriptorProto {
	f := protodesc.ToFileDescriptorProto(hellov1.File_hello_v1_hello_proto)
	if edit != nil {
		edit(f)
	}
	return f
}

// writeFile writes b to a temporary file and returns its path.
func writeFile(t *testing.T, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "descriptors.binpb")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeDescriptorSet writes a FileDescriptorSet of files and returns its path.
func writeDescriptorSet(t *testing.T, files ...*descriptorpb.FileDescriptorProto) string {
	t.Helper()
	b, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: files})
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, b)
}

func TestNewResolver_DescriptorSetGivesEveryKind(t *testing.T) {
	r, err := NewResolver(Options{DescriptorSetPath: writeDescriptorSet(t, helloFile(nil))})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		kind    Kind
		request protoreflect.FullName
	}{
		sayHello:                    {Unary, "hello.v1.HelloRequest"},
		streamHellos:                {ServerStreaming, "hello.v1.HelloRequest"},
		collectHellos:               {ClientStreaming, "hello.v1.HelloRequest"},
		chat:                        {BidiStreaming, "hello.v1.HelloRequest"},
		"/hello.v1.Stats/GetCounts": {Unary, "hello.v1.GetCountsRequest"},
	}
	for m, w := range want {
		if got := r.Method(m); got.Kind != w.kind || requestName(got) != w.request {
			t.Errorf("Method(%s) = %v, request %q; want %v, request %q", m, got.Kind, requestName(got), w.kind, w.request)
		}
	}
}

func TestNewResolver_UnaryMethodsAreUnary(t *testing.T) {
	r, err := NewResolver(Options{UnaryMethods: []string{sayHello, "/Root/Get_2"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{sayHello, "/Root/Get_2"} {
		if got := r.Method(m); got.Kind != Unary || got.Request != nil {
			t.Errorf("Method(%s) = %v, request %q; want unary, no request: no descriptor was given", m, got.Kind, requestName(got))
		}
	}
	if got := r.Method(chat).Kind; got != Unknown {
		t.Errorf("Kind(%s) = %v, want unknown", chat, got)
	}
}

func TestNewResolver_RejectsBadInputsNamingThem(t *testing.T) {
	garbage := writeFile(t, []byte("this is not a descriptor set"))
	noServices := writeDescriptorSet(t, helloFile(func(f *descriptorpb.FileDescriptorProto) { f.Service = nil }))
	helloSet := writeDescriptorSet(t, helloFile(nil))
	missing := filepath.Join(t.TempDir(), "missing.binpb")
	tests := []struct {
		name    string
		opts    Options
		wantErr []string
	}{
		{"missing file", Options{DescriptorSetPath: missing}, []string{missing, "no such file"}},
		{"garbage file", Options{DescriptorSetPath: garbage}, []string{garbage, "not a binary FileDescriptorSet"}},
		{"no services", Options{DescriptorSetPath: noServices}, []string{noServices, "no service methods"}},
		{"no leading slash", Options{UnaryMethods: []string{"hello.v1.Greeter/SayHello"}}, []string{`UnaryMethods[0] "hello.v1.Greeter/SayHello"`}},
		{"no method", Options{UnaryMethods: []string{sayHello, "/hello.v1.Greeter"}}, []string{`UnaryMethods[1] "/hello.v1.Greeter"`}},
		{"empty method", Options{UnaryMethods: []string{"/hello.v1.Greeter/"}}, []string{`method name ""`}},
		{"extra slash", Options{UnaryMethods: []string{"/a.B/C/D"}}, []string{`method name "C/D"`}},
		{"empty package part", Options{UnaryMethods: []string{"/hello..Greeter/SayHello"}}, []string{`service name "hello..Greeter"`}},
		{"space", Options{UnaryMethods: []string{" /hello.v1.Greeter/SayHello"}}, []string{`UnaryMethods[0] " /hello.v1.Greeter/SayHello"`}},
		{"empty entry", Options{UnaryMethods: []string{""}}, []string{`UnaryMethods[0] ""`}},
		{"digit first", Options{UnaryMethods: []string{"/1a.B/C"}}, []string{`service name "1a.B"`}},
		{"listed but streaming", Options{DescriptorSetPath: helloSet, UnaryMethods: []string{chat}}, []string{chat, "bidi_streaming"}},
		{"reflection without backend", Options{UseReflection: true}, []string{"Backend"}},
		{"negative interval", Options{RefreshInterval: -1}, []string{"RefreshInterval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewResolver(tt.opts)
			if err == nil {
				t.Fatalf("NewResolver(%+v) succeeded, want an error", tt.opts)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}
