package proxy

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// Frame is one gRPC message as it travels the wire, not decoded. The proxy
// forwards frames; it decodes a copy only where a check needs the fields.
type Frame struct {
	Data []byte
}

// Codec moves Frames as raw bytes and anything else as protobuf, under the
// name "proto" so that peers see ordinary gRPC. Force it on the gateway's
// servers (grpc.ForceServerCodecV2) and on its connection to the IPAM
// (grpc.ForceCodecV2), where typed calls such as VerifyToken share it.
func Codec() encoding.CodecV2 {
	return codec{proto: encoding.GetCodecV2(proto.Name)}
}

type codec struct {
	proto encoding.CodecV2
}

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*Frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.Data)}, nil
	}
	return c.proto.Marshal(v)
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*Frame); ok {
		f.Data = data.Materialize()
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (codec) Name() string { return proto.Name }
