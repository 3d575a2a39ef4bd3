// Package wire is the ext_proc server's gRPC codec: gRPC's proto codec
// with the hot ext_proc messages (the replies the server builds, the
// headers and bodies Envoy sends) written and read by hand, without
// protobuf's reflection, and everything else left to protobuf. What it
// writes and reads is protobuf's byte for byte; its tests and fuzz targets
// hold it to that, and the extproc tests run every gateway they start
// through a codec that checks each message against protobuf.
//
// It knows nothing of the server: install it with
// grpc.ForceServerCodecV2(wire.Codec()).
package wire
