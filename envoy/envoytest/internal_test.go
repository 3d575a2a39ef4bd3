package envoytest

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"

	"modelgate/envoy"
	"modelgate/envoy/routing"
)

// prepare moves everything to free loopback ports and a stderr access log
// to stdout, and the result still validates.
func TestPrepare(t *testing.T) {
	for _, c := range []struct {
		log     envoy.AccessLog
		wantLog bool
	}{{envoy.AccessLogStdout, true}, {envoy.AccessLogStderr, true}, {envoy.AccessLogNone, false}} {
		t.Run(string(c.log), func(t *testing.T) {
			b, err := envoy.Bootstrap(envoy.Config{Listen: "0.0.0.0:8080", AdminListen: "127.0.0.1:9901", ExtProcAddress: "127.0.0.1:50051",
				AccessLog: c.log, Routing: routing.Table{Backends: []routing.Backend{{Name: "main", BaseURL: "http://127.0.0.1:9"}}}})
			if err != nil {
				t.Fatal(err)
			}
			want := AccessLogFormat(b)
			format, err := prepare(b)
			if err != nil {
				t.Fatal(err)
			}
			if err := envoy.Validate(b); err != nil {
				t.Fatalf("the prepared bootstrap: %v", err)
			}
			for what, a := range map[string]interface {
				GetAddress() string
				GetPortValue() uint32
			}{
				"admin":    b.GetAdmin().GetAddress().GetSocketAddress(),
				"listener": b.GetStaticResources().GetListeners()[0].GetAddress().GetSocketAddress(),
			} {
				if a.GetAddress() != "127.0.0.1" || a.GetPortValue() != 0 {
					t.Errorf("%s address %s:%d, want 127.0.0.1:0", what, a.GetAddress(), a.GetPortValue())
				}
			}
			if (format != nil) != c.wantLog || len(format) != len(want) {
				t.Fatalf("format %v, want %v", format, want)
			}
			if !c.wantLog {
				return
			}
			for k, v := range want {
				if format[k] != v {
					t.Errorf("format[%s] = %q, want %q", k, format[k], v)
				}
			}
			for _, f := range connectionManagers(b.GetStaticResources().GetListeners()[0]) {
				if err := f.hcm.GetAccessLog()[0].GetTypedConfig().UnmarshalTo(&streamv3.StdoutAccessLog{}); err != nil {
					t.Errorf("the access log is not on stdout: %v", err)
				}
			}
		})
	}
}

// Lines reach the reader whole, however the pipe cuts them; what it
// refuses, and everything without a reader, goes to the tail.
func TestLines(t *testing.T) {
	var got []string
	w := &lines{tail: tail{max: 1 << 10}, line: func(l []byte) error {
		if strings.HasPrefix(string(l), "bad") {
			return errors.New("refused")
		}
		got = append(got, string(l))
		return nil
	}}
	for _, chunk := range []string{`{"a":`, `1}` + "\n" + `{"b"`, `:2}` + "\nbad line\n\n", `{"c":3}` + "\n" + `{"partial"`} {
		w.Write([]byte(chunk)) //nolint:errcheck // never fails
	}
	if strings.Join(got, "|") != `{"a":1}|{"b":2}|{"c":3}` {
		t.Errorf("lines %q", got)
	}
	if s := w.tail.String(); !strings.Contains(s, "bad line") || !strings.Contains(s, "refused") || strings.Contains(s, `"a"`) {
		t.Errorf("tail %q", s)
	}

	small := &tail{max: 8}
	small.Write([]byte("0123456789abc")) //nolint:errcheck // never fails
	if small.String() != "56789abc" {
		t.Errorf("tail %q, want the last 8 bytes", small.String())
	}
}

func TestBinary(t *testing.T) {
	if p, err := binary(""); p != "" || err != nil {
		t.Errorf(`binary("") = %q, %v`, p, err)
	}
	if p, err := binary("sh"); runtime.GOOS != "windows" && (err != nil || !strings.HasSuffix(p, "/sh")) {
		t.Errorf(`binary("sh") = %q, %v: want it found in PATH`, p, err)
	}
	if _, err := binary("no-such-envoy-binary"); err == nil || !strings.Contains(err.Error(), "not found in PATH") {
		t.Errorf(`binary("no-such-envoy-binary"): %v`, err)
	}
}
