package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"strconv"
	"sync"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"modelgate/extproc"
	"modelgate/extproc/extproctest"
)

// The floor: the cheapest legal ext_proc server, what the gateway's cost
// is measured against. For each message Envoy sends it reads the
// top-level fields of the ProcessingRequest only as far as to find which
// of the request oneof's members it holds (field tags and lengths, the
// members' contents skipped unread), except for response headers, whose
// header keys it reads to find content-type (and that value, to see
// whether it is text/event-stream). It answers with the smallest legal
// reply: the response oneof member matching the request's, holding an
// empty HeadersResponse, BodyResponse or TrailersResponse (no
// CommonResponse: CONTINUE), and for event-stream response headers also
// the mode override to STREAMED the gateway sends, so that it costs Envoy
// the same round trips as the gateway. Each reply is encoded once per
// process and sent as a grpc.PreparedMsg, so nothing is marshalled or
// allocated for it per message. Its HTTP/2 windows are fixed like the
// gateway's (1 MiB a stream, 16 MiB a connection; no BDP pings), streams
// start on pooled goroutines as the gateway's do, and its GOGC is
// noopGOGC.

// noopEnv, when set, makes this program the no-op server on its address
// (and its pprof on noopPprofEnv's, its GOGC noopGOGCEnv's): the benchmark
// starts it as a child process of its own, so that each server's CPU is
// its process's alone.
const (
	noopEnv      = "EXTPROCBENCH_NOOP_ADDR"
	noopPprofEnv = "EXTPROCBENCH_NOOP_PPROF"
	noopGOGCEnv  = "EXTPROCBENCH_NOOP_GOGC"
	noopKindEnv  = "EXTPROCBENCH_NOOP_KIND"
)

// noopGOGC is the floor's GOGC unless -noop-gogc says otherwise: the
// cheapest measured. The floor allocates only what gRPC's transport does
// per message, but its live heap is small, so at Go's default (100) it
// collects often: on 2 cores (2026-11-28, docs/performance.md) a streamed
// exchange cost it a median 1599 µs CPU at 100, 1310 at 200, 1189 at
// 400, 1168 at 800 and 1172 at 3200, the last three within the
// measurement's spread, while its RSS under load grew from 40 MiB at 400
// to 55 and 152 MiB.
const noopGOGC = 400

// The gateway's windows (cmd/modelgate serve).
const (
	noopStreamWindow = 1 << 20
	noopConnWindow   = 16 << 20
)

// serveNoop serves the floor on addr (with the gRPC health service, as
// the gateway has, which the benchmark waits for) and Go's profiles on
// pprofAddr until the process is killed.
func serveNoop(addr, pprofAddr string) error {
	gogc := os.Getenv(noopGOGCEnv)
	percent := noopGOGC
	if gogc != "" {
		p, err := strconv.Atoi(gogc)
		if err != nil {
			return fmt.Errorf("%s: %w", noopGOGCEnv, err)
		}
		percent = p
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if pprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		go http.ListenAndServe(pprofAddr, mux) //nolint:errcheck // profiles are optional
	}
	if os.Getenv(noopKindEnv) == "proto" {
		// The former floor: gRPC's defaults (proto codec, windows grown
		// by BDP estimation) and extproctest.Noop's generated handler.
		gs := grpc.NewServer()
		extprocv3.RegisterExternalProcessorServer(gs, extproctest.Noop{})
		healthpb.RegisterHealthServer(gs, health.NewServer())
		return gs.Serve(l)
	}
	opts := []grpc.ServerOption{grpc.ForceServerCodecV2(floorCodec{encoding.GetCodecV2(protocodec.Name)}),
		grpc.StaticStreamWindowSize(noopStreamWindow), grpc.StaticConnWindowSize(noopConnWindow),
		// As the gateway: streams start on pooled goroutines.
		grpc.NumStreamWorkers(extproc.StreamWorkers())}
	gs := grpc.NewServer(opts...)
	gs.RegisterService(&floorService, nil)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	return gs.Serve(l)
}

// floorService is the ext_proc service with the floor's own handler, which
// receives into a message and sends prepared replies instead of the
// generated code's ProcessingRequest and ProcessingResponse.
var floorService = grpc.ServiceDesc{
	ServiceName: extprocv3.ExternalProcessor_ServiceDesc.ServiceName,
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{StreamName: "Process", Handler: processFloor,
		ServerStreams: true, ClientStreams: true}},
	Metadata: extprocv3.ExternalProcessor_ServiceDesc.Metadata,
}

func processFloor(_ any, s grpc.ServerStream) error {
	replies, err := preparedReplies(s)
	if err != nil {
		return err
	}
	var m message
	for {
		if err := s.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		if err := s.SendMsg(replies[m.reply]); err != nil {
			return nil
		}
	}
}

// Replies, by the request oneof's field number in ProcessingRequest; the
// reply's in ProcessingResponse is one less (external_processor.proto).
const (
	replyToRequestHeaders   = 2
	replyToResponseHeaders  = 3
	replyToRequestBody      = 4
	replyToResponseBody     = 5
	replyToRequestTrailers  = 6
	replyToResponseTrailers = 7
	// replyToEventStream: response headers of an event stream,
	// answered with the mode override.
	replyToEventStream = 8
	// replyToNothing: a message with none of the oneof's members (Envoy sends
	// none such), answered with an empty ProcessingResponse.
	replyToNothing = 0
)

var streamedMode = &filterv3.ProcessingMode{
	RequestBodyMode:  filterv3.ProcessingMode_BUFFERED,
	ResponseBodyMode: filterv3.ProcessingMode_STREAMED,
}

// replyBytes are the replies' wire forms, by reply.
var replyBytes = func() [replyToEventStream + 1][]byte {
	var r [replyToEventStream + 1][]byte
	for n := replyToRequestHeaders; n <= replyToResponseTrailers; n++ {
		// The reply's message field, holding an empty message.
		r[n] = protowire.AppendTag(nil, protowire.Number(n-1), protowire.BytesType)
		r[n] = protowire.AppendVarint(r[n], 0)
	}
	mode, err := proto.Marshal(streamedMode)
	if err != nil {
		panic(err)
	}
	// ProcessingResponse.mode_override is field 9.
	r[replyToEventStream] = protowire.AppendBytes(protowire.AppendTag(r[replyToResponseHeaders][:2:2], 9, protowire.BytesType), mode)
	r[replyToNothing] = []byte{}
	return r
}()

var (
	prepareOnce sync.Once
	prepared    [replyToEventStream + 1]*grpc.PreparedMsg
	prepareErr  error
)

// preparedReplies encodes the replies once, for the first stream, through
// the floor's codec (as gRPC frames them: no compression, which Envoy
// does not ask for on ext_proc streams).
func preparedReplies(s grpc.ServerStream) (*[replyToEventStream + 1]*grpc.PreparedMsg, error) {
	prepareOnce.Do(func() {
		for i, b := range replyBytes {
			p := new(grpc.PreparedMsg)
			if err := p.Encode(s, rawReply(b)); err != nil {
				prepareErr = err
				return
			}
			prepared[i] = p
		}
	})
	return &prepared, prepareErr
}

// rawReply is a reply's wire form, which floorCodec writes as it is.
type rawReply []byte

// message is what the floor reads of a ProcessingRequest: the reply it
// takes.
type message struct{ reply int }

// floorCodec writes rawReply and reads message; anything else (the health
// service's messages) goes to proto.
type floorCodec struct{ proto encoding.CodecV2 }

func (c floorCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawReply); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.proto.Marshal(v)
}

func (c floorCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*message); ok {
		var b []byte
		if len(data) == 1 {
			b = data[0].ReadOnlyData()
		} else {
			b = data.Materialize()
		}
		return m.read(b)
	}
	return c.proto.Unmarshal(data, v)
}

func (floorCodec) Name() string { return protocodec.Name }

// read walks b's top-level fields and takes the reply to the last request
// oneof member among them (protobuf's rule for a oneof met more than
// once), skipping every field's contents but response headers'.
func (m *message) read(b []byte) error {
	m.reply = replyToNothing
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType || num < replyToRequestHeaders || num > replyToResponseTrailers {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return protowire.ParseError(n)
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		m.reply = int(num)
		if num == replyToResponseHeaders && eventStream(v) {
			m.reply = replyToEventStream
		}
	}
	return nil
}

// eventStream reports whether the HttpHeaders h has a content-type header
// whose media type is text/event-stream. It reads HttpHeaders.headers
// (field 1), its HeaderMap.headers (1) and each HeaderValue's key (1),
// value (2) and raw_value (3), as Envoy sends them; a malformed message is
// taken for one without.
func eventStream(h []byte) bool {
	found := false
	fields(h, func(num protowire.Number, hm []byte) {
		if num != 1 {
			return
		}
		fields(hm, func(num protowire.Number, hv []byte) {
			if num != 1 {
				return
			}
			var key, value []byte
			fields(hv, func(num protowire.Number, v []byte) {
				switch num {
				case 1:
					key = v
				case 2, 3:
					if len(v) > 0 {
						value = v
					}
				}
			})
			if string(key) == "content-type" {
				mt, _, _ := bytes.Cut(value, []byte(";"))
				found = bytes.EqualFold(bytes.TrimSpace(mt), []byte("text/event-stream"))
			}
		})
	})
	return found
}

// fields calls f with each length-delimited field of b, skipping others.
func fields(b []byte, f func(protowire.Number, []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return
		}
		b = b[n:]
		f(num, v)
	}
}
