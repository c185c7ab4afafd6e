package methodkind

import (
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/collapser/collapser/src/internal/logrecorder"
	"github.com/collapser/collapser/src/internal/testkit"
)

const (
	alphaList = "/test.a.Alpha/List"
	betaList  = "/test.b.Beta/List"
	betaFind  = "/test.b.Beta/Find"
	betaPing  = "/test.b.Beta/Ping"
)

// sharedFiles returns three files as an API may split them:
// test/common.proto declares test.common.Page, and test/a.proto
// (test.a.Alpha) and test/b.proto (test.b.Beta) both import it. Beta's Find
// takes a message with a Page in it; its Ping takes one that uses nothing
// imported.
func sharedFiles() (common, a, b *descriptorpb.FileDescriptorProto) {
	message := func(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
	}
	field := func(name string, typ descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(1), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: typ.Enum()}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	method := func(name, input string) *descriptorpb.MethodDescriptorProto {
		return &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(input), OutputType: proto.String(input)}
	}
	file := func(name, pkg string, deps []string, messages []*descriptorpb.DescriptorProto, service string, methods ...*descriptorpb.MethodDescriptorProto) *descriptorpb.FileDescriptorProto {
		f := &descriptorpb.FileDescriptorProto{Name: proto.String(name), Package: proto.String(pkg), Syntax: proto.String("proto3"), Dependency: deps, MessageType: messages}
		if service != "" {
			f.Service = []*descriptorpb.ServiceDescriptorProto{{Name: proto.String(service), Method: methods}}
		}
		return f
	}
	imports := []string{"test/common.proto"}
	common = file("test/common.proto", "test.common", nil,
		[]*descriptorpb.DescriptorProto{message("Page", field("size", descriptorpb.FieldDescriptorProto_TYPE_INT32, ""))}, "")
	a = file("test/a.proto", "test.a", imports, nil, "Alpha", method("List", ".test.common.Page"))
	b = file("test/b.proto", "test.b", imports,
		[]*descriptorpb.DescriptorProto{
			message("Query", field("page", descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".test.common.Page")),
			message("Ping", field("note", descriptorpb.FieldDescriptorProto_TYPE_STRING, "")),
		},
		"Beta", method("List", ".test.common.Page"), method("Find", ".test.b.Query"), method("Ping", ".test.b.Ping"))
	return common, a, b
}

var (
	// allResolved is every shared-files method's request, all files given.
	allResolved = map[string]protoreflect.FullName{alphaList: "test.common.Page", betaList: "test.common.Page", betaFind: "test.b.Query", betaPing: "test.b.Ping"}
	// commonMissing is what resolves without test/common.proto: only Ping.
	commonMissing = map[string]protoreflect.FullName{alphaList: "", betaList: "", betaFind: "", betaPing: "test.b.Ping"}
)

// checkRequests checks that r knows each method of want as unary, and its
// Request by the name want gives it ("" = nil).
func checkRequests(t *testing.T, r *Resolver, want map[string]protoreflect.FullName) {
	t.Helper()
	for m, name := range want {
		if got := r.Method(m); got.Kind != Unary || requestName(got) != name {
			t.Errorf("Method(%s) = %v, request %q; want unary, request %q", m, got.Kind, requestName(got), name)
		}
	}
}

func TestNewResolver_DescriptorSetGivesTheRequestsItResolves(t *testing.T) {
	common, a, b := sharedFiles()
	// clash declares test.b.Ping again: the files do not build together.
	clash := &descriptorpb.FileDescriptorProto{Name: proto.String("test/clash.proto"), Package: proto.String("test.b"), MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("Ping")}}}
	tests := []struct {
		name  string
		files []*descriptorpb.FileDescriptorProto
		want  map[string]protoreflect.FullName
	}{
		{"every file", []*descriptorpb.FileDescriptorProto{b, a, common}, allResolved},
		{"the import left out", []*descriptorpb.FileDescriptorProto{a, b}, commonMissing},
		{"files that do not build together", []*descriptorpb.FileDescriptorProto{common, a, b, clash},
			map[string]protoreflect.FullName{alphaList: "", betaList: "", betaFind: "", betaPing: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResolver(Options{DescriptorSetPath: writeDescriptorSet(t, tt.files...)})
			if err != nil {
				t.Fatal(err)
			}
			checkRequests(t, r, tt.want)
		})
	}
}

func TestNewResolver_FilesWithoutAnImportGiveNoRequestThatNeedsIt(t *testing.T) {
	_, a, b := sharedFiles()
	r, err := NewResolver(Options{Files: newFiles(t, a, b)})
	if err != nil {
		t.Fatal(err)
	}
	checkRequests(t, r, commonMissing)
}

func TestResolver_LearnsRequestsFromReflection(t *testing.T) {
	common, a, b := sharedFiles()
	tests := []struct {
		name  string
		files *protoregistry.Files
		want  map[string]protoreflect.FullName
	}{
		// Services are described in name order: test.a.Alpha's answer
		// carries test/common.proto, test.b.Beta's comes without it.
		{"an import shared by two services, sent once", newFiles(t, common, a, b), allResolved},
		{"an import the backend lacks", newFiles(t, a, b), commonMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewResolver(Options{Backend: startReflection(t, tt.files), UseReflection: true})
			if err != nil {
				t.Fatal(err)
			}
			runResolver(t, r)
			testkit.WaitFor(t, "Beta learned", func() bool { return r.Method(betaPing).Kind == Unary })
			checkRequests(t, r, tt.want)
		})
	}
}

func TestResolver_NewRequestDescriptorsAloneChangeNothingLogged(t *testing.T) {
	common, a, b := sharedFiles()
	refreshes := &refreshLog{}
	cc := startReflection(t, newFiles(t, common, a, b), grpc.StreamInterceptor(refreshes.intercept))
	// The descriptor set disagrees with reflection on Alpha's List.
	explicit := proto.CloneOf(a)
	explicit.Service[0].Method[0].ServerStreaming = proto.Bool(true)
	logs := &logrecorder.Recorder{}
	r, err := NewResolver(Options{Backend: cc, UseReflection: true, DescriptorSetPath: writeDescriptorSet(t, common, explicit),
		RefreshInterval: 10 * time.Millisecond, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	runResolver(t, r)
	// A refresh starts after the previous one ended: four starts, three
	// refreshes done, each with new Request descriptors.
	testkit.WaitFor(t, "three refreshes", func() bool {
		r.Method("/test.a.Alpha/Missing")
		return len(refreshes.snapshot()) >= 4
	})
	if n := logs.Count(slog.LevelInfo, "learned method kinds", "", ""); n != 1 {
		t.Errorf("learned kinds logged %d times, want once", n)
	}
	if n := logs.Count(slog.LevelWarn, "explicit method kind overrides", "method", alphaList); n != 1 {
		t.Errorf("override logged %d times, want once", n)
	}
	if got := r.Method(alphaList); got.Kind != ServerStreaming || requestName(got) != "test.common.Page" {
		t.Errorf("Method(%s) = %v, request %q; want the descriptor set's server_streaming, request test.common.Page", alphaList, got.Kind, requestName(got))
	}
	checkRequests(t, r, map[string]protoreflect.FullName{betaFind: "test.b.Query"})
}
