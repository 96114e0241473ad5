// Package testutil holds helpers shared by the tests of several packages:
// locating the real test data that lives outside the repository, and the
// stock-protobuf descriptor of tf.train.Example used to cross-check the
// hand-written codec. Only tests import it.
package testutil

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// SharedData returns the absolute path of shared/data (or of sub-paths
// within it), the real data from outside the project that sits beside the
// repository and is never copied into it. Tests run in their package
// directory, one level below the repository root. PIPERUN_SHARED_DATA
// overrides the location. The test is skipped, saying why, when the data
// is absent.
func SharedData(tb testing.TB, sub ...string) string {
	tb.Helper()
	dir := os.Getenv("PIPERUN_SHARED_DATA")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "data")
	}
	dir = filepath.Join(append([]string{dir}, sub...)...)
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("shared test data not found at %s (it is not part of the repo; set PIPERUN_SHARED_DATA to its path): %v", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

// ExampleDescriptor builds tensorflow.Example's descriptor (example.proto,
// proto3) for google.golang.org/protobuf's dynamic messages.
func ExampleDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	s := proto.String
	repeated := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	optional := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	list := func(name string, typ descriptorpb.FieldDescriptorProto_Type) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{Name: s(name), Field: []*descriptorpb.FieldDescriptorProto{
			{Name: s("value"), Number: proto.Int32(1), Label: repeated, Type: typ.Enum(), JsonName: s("value")},
		}}
	}
	msgField := func(name string, num int32, typ string, label *descriptorpb.FieldDescriptorProto_Label, oneof *int32) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: s(name), Number: proto.Int32(num), Label: label,
			Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: s(typ), OneofIndex: oneof}
	}
	zero := proto.Int32(0)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    s("tensorflow/core/example/example.proto"),
		Package: s("tensorflow"),
		Syntax:  s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			list("BytesList", descriptorpb.FieldDescriptorProto_TYPE_BYTES),
			list("FloatList", descriptorpb.FieldDescriptorProto_TYPE_FLOAT),
			list("Int64List", descriptorpb.FieldDescriptorProto_TYPE_INT64),
			{
				Name: s("Feature"),
				Field: []*descriptorpb.FieldDescriptorProto{
					msgField("bytes_list", 1, ".tensorflow.BytesList", optional, zero),
					msgField("float_list", 2, ".tensorflow.FloatList", optional, zero),
					msgField("int64_list", 3, ".tensorflow.Int64List", optional, zero),
				},
				OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: s("kind")}},
			},
			{
				Name:  s("Features"),
				Field: []*descriptorpb.FieldDescriptorProto{msgField("feature", 1, ".tensorflow.Features.FeatureEntry", repeated, nil)},
				NestedType: []*descriptorpb.DescriptorProto{{
					Name: s("FeatureEntry"),
					Field: []*descriptorpb.FieldDescriptorProto{
						{Name: s("key"), Number: proto.Int32(1), Label: optional, Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()},
						msgField("value", 2, ".tensorflow.Feature", optional, nil),
					},
					Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
				}},
			},
			{
				Name:  s("Example"),
				Field: []*descriptorpb.FieldDescriptorProto{msgField("features", 1, ".tensorflow.Features", optional, nil)},
			},
		},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return fd.Messages().ByName("Example")
}
