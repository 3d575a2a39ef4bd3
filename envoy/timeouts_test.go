package envoy

import (
	"testing"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"modelgate/translate/api/spec"
)

// A backend's timeouts become its routes' per-try timeouts: the stream
// idle timeout only on the route of streaming requests. A model's own
// timeouts get routes of their own before the backend's, matching the
// model header.
func TestBackendTimeouts(t *testing.T) {
	t.Parallel()
	cfg := Config{ExtProcAddress: "127.0.0.1:50051", Backends: []Backend{{
		Name: "openai", BaseURL: "https://api.openai.com",
		Timeouts: Timeouts{ResponseHeaders: 60 * time.Second, StreamIdle: 20 * time.Second},
		Models:   []ModelTimeouts{{Model: "o3", Timeouts: Timeouts{ResponseHeaders: 600 * time.Second, StreamIdle: 400 * time.Second}}},
	}, {Name: "plain", BaseURL: "http://127.0.0.1:1"}}}
	hcm := hcmOf(t, generate(t, cfg))
	rs := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	backend, model, stream := exactHeader("x-modelgate-backend", "openai"), exactHeader(ModelHeader, "o3"), exactHeader(StreamHeader, "1")
	want := []struct {
		name         string
		headers      []*routev3.HeaderMatcher
		perTry, idle time.Duration
	}{
		{"openai/o3/stream", []*routev3.HeaderMatcher{backend, model, stream}, 600 * time.Second, 400 * time.Second},
		{"openai/o3", []*routev3.HeaderMatcher{backend, model}, 600 * time.Second, 0},
		{"openai/stream", []*routev3.HeaderMatcher{backend, stream}, 60 * time.Second, 20 * time.Second},
		{"openai", []*routev3.HeaderMatcher{backend}, 60 * time.Second, 0},
		{"plain", []*routev3.HeaderMatcher{exactHeader("x-modelgate-backend", "plain")}, 0, 0},
	}
	if len(rs) != len(want)+1 {
		t.Fatalf("got %d routes, want %d and the catch-all", len(rs), len(want))
	}
	for i, w := range want {
		r := rs[i]
		if r.GetName() != w.name {
			t.Errorf("route %d is %q, want %q", i, r.GetName(), w.name)
		}
		if diff := cmp.Diff(w.headers, r.GetMatch().GetHeaders(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: headers (-want +got):\n%s", w.name, diff)
		}
		ra := r.GetRoute()
		if ra.GetTimeout().AsDuration() != 0 {
			t.Errorf("%s: route timeout %v, want 0 (it would cut streams)", w.name, ra.GetTimeout().AsDuration())
		}
		var wantPolicy *routev3.RetryPolicy
		if w.perTry > 0 {
			wantPolicy = &routev3.RetryPolicy{NumRetries: wrapperspb.UInt32(0), PerTryTimeout: durationpb.New(w.perTry)}
			if w.idle > 0 {
				wantPolicy.PerTryIdleTimeout = durationpb.New(w.idle)
			}
		}
		if diff := cmp.Diff(wantPolicy, ra.GetRetryPolicy(), protocmp.Transform()); diff != "" {
			t.Errorf("%s: retry policy (-want +got):\n%s", w.name, diff)
		}
		if diff := cmp.Diff([]string{"x-modelgate-backend", ModelHeader, StreamHeader}, r.GetRequestHeadersToRemove()); diff != "" {
			t.Errorf("%s: request_headers_to_remove (-want +got):\n%s", w.name, diff)
		}
	}
	if got := hcm.GetStreamIdleTimeout().AsDuration(); got < 410*time.Second {
		t.Errorf("stream_idle_timeout %v would cut o3's streams (idle 400s)", got)
	}
	if got := hcm.GetRequestTimeout().AsDuration(); got != defaultRequestTimeout {
		t.Errorf("request_timeout = %v, want %v", got, defaultRequestTimeout)
	}
}

func TestBackendTimeoutsRejected(t *testing.T) {
	t.Parallel()
	for name, b := range map[string]Backend{
		"negative":       {Name: "a", BaseURL: "http://x", Timeouts: Timeouts{StreamIdle: -time.Second}},
		"model newline":  {Name: "a", BaseURL: "http://x", Models: []ModelTimeouts{{Model: "m\n"}}},
		"model twice":    {Name: "a", BaseURL: "http://x", Models: []ModelTimeouts{{Model: "m"}, {Model: "m"}}},
		"model negative": {Name: "a", BaseURL: "http://x", Models: []ModelTimeouts{{Model: "m", Timeouts: Timeouts{ResponseHeaders: -1}}}},
	} {
		if _, err := Bootstrap(Config{ExtProcAddress: "127.0.0.1:1", Backends: []Backend{b}}); err == nil {
			t.Errorf("%s: Bootstrap accepted %+v", name, b)
		}
	}
}

// Every local reply mapper marks the reply and answers an OpenAI error.
func TestLocalReplyConfig(t *testing.T) {
	t.Parallel()
	lrc := hcmOf(t, generate(t, testConfig)).GetLocalReplyConfig()
	if len(lrc.GetMappers()) != len(localReplies) || lrc.GetBodyFormat() != nil {
		t.Fatalf("local_reply_config = %v, want one mapper per entry and no top-level body_format (it would rewrite /v1/models)", lrc)
	}
	for i, m := range lrc.GetMappers() {
		if m.GetFilter().GetResponseFlagFilter() == nil && m.GetFilter().GetStatusCodeFilter() == nil {
			t.Errorf("mapper %d filter %v: want response flags or a status", i, m.GetFilter())
		}
		if h := m.GetHeadersToAdd(); len(h) != 1 || h[0].GetHeader().GetKey() != LocalReplyHeader ||
			h[0].GetHeader().GetValue() != "%RESPONSE_CODE_DETAILS%" {
			t.Errorf("mapper %d headers_to_add = %v", i, h)
		}
		f := m.GetBodyFormatOverride()
		if f.GetContentType() != "application/json" {
			t.Errorf("mapper %d content type %q", i, f.GetContentType())
		}
		if err := spec.Validate("ErrorResponse", []byte(f.GetTextFormatSource().GetInlineString())); err != nil {
			t.Errorf("mapper %d body: %v", i, err)
		}
	}
}
