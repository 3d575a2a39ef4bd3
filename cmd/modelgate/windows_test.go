package main

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The server gives Envoy fixed HTTP/2 windows and sends no bandwidth
// estimation pings with the data it receives (each one a frame for Envoy
// to answer).
func TestServerWindowsAreFixed(t *testing.T) {
	grpcAddr, _ := startGateway(t, "", openSQLite(t), func(string) string { return "" })
	conn, err := net.Dial("tcp", grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a test's bound
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// A health check, as a gRPC client sends it: headers, then one empty
	// message (five bytes of gRPC framing) that ends the stream.
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", grpcAddr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) //nolint:errcheck // a bytes.Buffer
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(1, true, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}

	var streamWindowSet, connWindowSet, answered bool
	for !answered {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				break
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
			v, ok := f.Value(http2.SettingInitialWindowSize)
			if !ok || v != streamWindow {
				t.Errorf("SETTINGS_INITIAL_WINDOW_SIZE = %d (set: %v), want %d", v, ok, streamWindow)
			}
			streamWindowSet = ok
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 && !connWindowSet {
				connWindowSet = true
				if want := uint32(connWindow - 65535); f.Increment != want {
					t.Errorf("the connection's window grows by %d, want %d (to %d)", f.Increment, want, connWindow)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				t.Errorf("the server sent a PING with the data it received: bandwidth estimation is on")
			}
		case *http2.HeadersFrame:
			answered = f.StreamID == 1 && f.StreamEnded()
		case *http2.RSTStreamFrame:
			t.Fatalf("the health check was reset: %v", f.ErrCode)
		}
	}
	if !streamWindowSet || !connWindowSet {
		t.Errorf("stream window set %v, connection window set %v; want both", streamWindowSet, connWindowSet)
	}
}
