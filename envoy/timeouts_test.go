package envoy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"modelgate/envoy/routing"
	"modelgate/translate/api/spec"
)

// A backend's timeouts become its routes' per-try timeouts: the stream
// idle timeout only on the route of streaming requests. A model's own
// timeouts get routes of their own before the backend's, matching the
// model header.
func TestBackendTimeouts(t *testing.T) {
	t.Parallel()
	cfg := Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{
		Backends: []routing.Backend{{
			Name: "openai", BaseURL: "https://api.openai.com",
			Timeouts: routing.Timeouts{ResponseHeaders: 60 * time.Second, StreamIdle: 20 * time.Second},
		}, {Name: "plain", BaseURL: "http://127.0.0.1:1"}},
		Models: []routing.Model{{ID: "o3", Deployments: []routing.Deployment{{Backend: "openai"}},
			Timeouts: routing.Timeouts{ResponseHeaders: 600 * time.Second, StreamIdle: 400 * time.Second}}},
	}}
	hcm := hcmOf(t, generate(t, cfg))
	rs := hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes()
	backend, model, stream := exactHeader("x-modelgate-backend", "openai"), exactHeader(routing.ModelHeader, "o3"), exactHeader(routing.StreamHeader, "1")
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
		if diff := cmp.Diff([]string{"x-modelgate-backend", routing.ModelHeader, routing.StreamHeader}, r.GetRequestHeadersToRemove()); diff != "" {
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
	backends := []routing.Backend{{Name: "a", BaseURL: "http://x"}}
	model := func(id string, t routing.Timeouts) routing.Model {
		return routing.Model{ID: id, Deployments: []routing.Deployment{{Backend: "a"}}, Timeouts: t}
	}
	own := routing.Timeouts{ResponseHeaders: time.Second}
	for name, rt := range map[string]routing.Table{
		"negative":       {Backends: []routing.Backend{{Name: "a", BaseURL: "http://x", Timeouts: routing.Timeouts{StreamIdle: -time.Second}}}},
		"model newline":  {Backends: backends, Models: []routing.Model{model("m\n", own)}},
		"model twice":    {Backends: backends, Models: []routing.Model{model("m", own), model("m", own)}},
		"model negative": {Backends: backends, Models: []routing.Model{model("m", routing.Timeouts{ResponseHeaders: -1})}},
	} {
		if _, err := Bootstrap(Config{ExtProcAddress: "127.0.0.1:1", Routing: rt}); err == nil {
			t.Errorf("%s: Bootstrap accepted %+v", name, rt)
		}
	}
}

// The first mapper leaves the ext_proc server's own replies as they are;
// then each entry has a mapper for the Messages API's clients, which
// answers that API's error, and one for the rest, which answers an OpenAI
// error; every one marks the reply and carries the request's id.
func TestLocalReplyConfig(t *testing.T) {
	t.Parallel()
	lrc := hcmOf(t, generate(t, testConfig)).GetLocalReplyConfig()
	if len(lrc.GetMappers()) != 2*len(localReplies)+1 || lrc.GetBodyFormat() != nil {
		t.Fatalf("local_reply_config = %v, want the server's mapper, two mappers per entry and no top-level body_format (it would rewrite /v1/models)", lrc)
	}
	first := lrc.GetMappers()[0]
	mf := first.GetFilter().GetMetadataFilter()
	if mf.GetMatcher().GetFilter() != routing.MetadataNamespace || mf.GetMatcher().GetPath()[0].GetKey() != GatewayReplyKey ||
		!mf.GetMatcher().GetValue().GetBoolMatch() || mf.GetMatchIfKeyNotFound() == nil || mf.GetMatchIfKeyNotFound().GetValue() ||
		first.GetBodyFormatOverride() != nil || first.GetBody() != nil || first.GetStatusCode() != nil || len(first.GetHeadersToAdd()) > 0 {
		t.Errorf("first mapper %v: want the server's marker and no rewrite", first)
	}
	for i, m := range lrc.GetMappers()[1:] {
		filter, messages := m.GetFilter(), i < len(localReplies)
		if messages {
			and := filter.GetAndFilter().GetFilters()
			dm := and[0].GetMetadataFilter().GetMatcher()
			if len(and) != 2 || dm.GetFilter() != routing.MetadataNamespace || dm.GetPath()[0].GetKey() != routing.DialectKey ||
				dm.GetValue().GetStringMatch().GetExact() != routing.AnthropicDialect || and[0].GetMetadataFilter().GetMatchIfKeyNotFound().GetValue() {
				t.Errorf("mapper %d filter %v: want the Messages API's clients and the entry's filter", i, filter)
				continue
			}
			filter = and[1]
		}
		if filter.GetResponseFlagFilter() == nil && filter.GetStatusCodeFilter() == nil {
			t.Errorf("mapper %d filter %v: want response flags or a status", i, filter)
		}
		if h := m.GetHeadersToAdd(); len(h) != 2 || h[0].GetHeader().GetKey() != routing.LocalReplyHeader ||
			h[0].GetHeader().GetValue() != "%RESPONSE_CODE_DETAILS%" || h[1].GetHeader().GetKey() != "x-request-id" ||
			h[1].GetHeader().GetValue() != "%REQ(x-request-id)%" {
			t.Errorf("mapper %d headers_to_add = %v", i, h)
		}
		f := m.GetBodyFormatOverride()
		if f.GetContentType() != "application/json" {
			t.Errorf("mapper %d content type %q", i, f.GetContentType())
		}
		body := []byte(f.GetTextFormatSource().GetInlineString())
		if messages {
			var e struct {
				Type  string
				Error struct{ Type, Message string }
			}
			if json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type == "" || e.Error.Message == "" {
				t.Errorf("mapper %d body %s: want the Messages API's error", i, body)
			}
		} else if err := spec.Validate("ErrorResponse", body); err != nil {
			t.Errorf("mapper %d body: %v", i, err)
		}
	}
}

// shortTimeouts lists every timer on the path of model's requests that
// would end an exchange its timeouts allow: the connection manager's
// stream_idle_timeout (no event restarts it while the provider works on
// an answer), and on each of the model's routes the route timeout, the
// route idle_timeout and the per-try timeouts.
func shortTimeouts(b *bootstrapv3.Bootstrap, model string, want routing.Timeouts) []string {
	var short []string
	longest := max(want.ResponseHeaders, want.StreamIdle)
	hcm := &hcmv3.HttpConnectionManager{}
	if err := b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
		return []string{err.Error()}
	}
	if d := hcm.GetStreamIdleTimeout().AsDuration(); hcm.GetStreamIdleTimeout() == nil || d > 0 && d <= longest {
		short = append(short, fmt.Sprintf("stream_idle_timeout %v (Envoy's default 5m when unset)", d))
	}
	routes := 0
	for _, r := range hcm.GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		if !slices.ContainsFunc(r.GetMatch().GetHeaders(), func(h *routev3.HeaderMatcher) bool {
			return h.GetName() == routing.ModelHeader && h.GetStringMatch().GetExact() == model
		}) {
			continue
		}
		routes++
		ra := r.GetRoute()
		stream := slices.ContainsFunc(r.GetMatch().GetHeaders(), func(h *routev3.HeaderMatcher) bool { return h.GetName() == routing.StreamHeader })
		if d := ra.GetTimeout().AsDuration(); ra.GetTimeout() == nil || d > 0 && d < longest {
			short = append(short, fmt.Sprintf("%s: timeout %v (15s when unset)", r.GetName(), d))
		}
		if d := ra.GetIdleTimeout().AsDuration(); d > 0 && d <= longest {
			short = append(short, fmt.Sprintf("%s: idle_timeout %v", r.GetName(), d))
		}
		rp := ra.GetRetryPolicy()
		if d := rp.GetPerTryTimeout().AsDuration(); d > 0 && d < want.ResponseHeaders {
			short = append(short, fmt.Sprintf("%s: per_try_timeout %v", r.GetName(), d))
		}
		// A buffered answer is silent until it is whole: a per-try idle
		// timeout on its route would cut it as the stream's would.
		if d := rp.GetPerTryIdleTimeout().AsDuration(); d > 0 && (stream && d < want.StreamIdle || !stream && d < want.ResponseHeaders) {
			short = append(short, fmt.Sprintf("%s: per_try_idle_timeout %v", r.GetName(), d))
		}
	}
	if routes == 0 {
		short = append(short, "no route of its own")
	}
	return short
}

// A reasoning model may take 900s to start answering: nothing on its path
// may end the exchange sooner, whether its timeouts are its own, its
// backend's or a fallback's. Before the connection manager's idle timeout
// followed response_headers, it was 310s here and cut every such answer
// with 504 "stream timeout".
func TestNoTimeoutShorterThanTheModels(t *testing.T) {
	t.Parallel()
	slow := routing.Timeouts{ResponseHeaders: 900 * time.Second, StreamIdle: 300 * time.Second}
	cfg := Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{
		Backends: []routing.Backend{
			{Name: "openai", BaseURL: "https://api.openai.com", Timeouts: routing.Timeouts{ResponseHeaders: 60 * time.Second, StreamIdle: 30 * time.Second}},
			{Name: "anthropic", BaseURL: "https://api.anthropic.com"},
		},
		Models: []routing.Model{
			{ID: "o3", Timeouts: slow, Deployments: []routing.Deployment{{Backend: "openai"}}},
			{ID: "thinker", Timeouts: slow, Fallback: &routing.Fallback{},
				Deployments: []routing.Deployment{{Backend: "anthropic"}, {Backend: "openai", Priority: 1}}},
		},
	}}
	b := generate(t, cfg)
	for _, model := range []string{"o3", "thinker"} {
		if short := shortTimeouts(b, model, slow); len(short) > 0 {
			t.Errorf("%s: timeouts shorter than response_headers %v / stream_idle %v: %v", model, slow.ResponseHeaders, slow.StreamIdle, short)
		}
	}
	if got := hcmOf(t, b).GetStreamIdleTimeout().AsDuration(); got != 910*time.Second {
		t.Errorf("stream_idle_timeout %v, want 910s (the longest path and the margin)", got)
	}

	// The check finds what the old bootstrap had: the idle timeout above
	// stream_idle only.
	hcm := hcmOf(t, b)
	hcm.StreamIdleTimeout = durationpb.New(310 * time.Second)
	b.GetStaticResources().GetListeners()[0].GetFilterChains()[0].GetFilters()[0].ConfigType =
		&listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)}
	if short := shortTimeouts(b, "o3", slow); len(short) != 1 || !strings.Contains(short[0], "stream_idle_timeout 5m10s") {
		t.Errorf("shortTimeouts with a 310s idle timeout = %v", short)
	}
}

// A model's timeouts override its backend's member by member: on each
// backend that serves it, and for a model with fallback, on every attempt
// with its first deployment's backend's filling in. A model without
// timeouts of its own gets no routes of its own.
func TestModelTimeoutsOrBackends(t *testing.T) {
	t.Parallel()
	cfg := Config{ExtProcAddress: "127.0.0.1:50051", Routing: routing.Table{
		Backends: []routing.Backend{
			{Name: "openai", BaseURL: "https://api.openai.com", Timeouts: routing.Timeouts{ResponseHeaders: 60 * time.Second, StreamIdle: 20 * time.Second}},
			{Name: "anthropic", BaseURL: "https://api.anthropic.com", Timeouts: routing.Timeouts{ResponseHeaders: 90 * time.Second}},
		},
		Models: []routing.Model{
			{ID: "o3", Timeouts: routing.Timeouts{ResponseHeaders: 600 * time.Second},
				Deployments: []routing.Deployment{{Backend: "openai"}, {Backend: "anthropic"}}},
			{ID: "fb", Timeouts: routing.Timeouts{StreamIdle: 30 * time.Second}, Fallback: &routing.Fallback{},
				Deployments: []routing.Deployment{{Backend: "anthropic"}, {Backend: "openai", Priority: 1}}},
			{ID: "plain", Deployments: []routing.Deployment{{Backend: "openai"}}},
		},
	}}
	type timers struct{ PerTry, Idle time.Duration }
	got := map[string]timers{}
	for _, r := range hcmOf(t, generate(t, cfg)).GetRouteConfig().GetVirtualHosts()[0].GetRoutes() {
		rp := r.GetRoute().GetRetryPolicy()
		got[r.GetName()] = timers{rp.GetPerTryTimeout().AsDuration(), rp.GetPerTryIdleTimeout().AsDuration()}
	}
	want := map[string]timers{
		"model_fb/stream":     {90 * time.Second, 30 * time.Second},
		"model_fb":            {90 * time.Second, 0},
		"openai/o3/stream":    {600 * time.Second, 20 * time.Second},
		"openai/o3":           {600 * time.Second, 0},
		"openai/fb/stream":    {60 * time.Second, 30 * time.Second},
		"openai/fb":           {60 * time.Second, 0},
		"openai/stream":       {60 * time.Second, 20 * time.Second},
		"openai":              {60 * time.Second, 0},
		"anthropic/o3":        {600 * time.Second, 0},
		"anthropic/fb/stream": {90 * time.Second, 30 * time.Second},
		"anthropic/fb":        {90 * time.Second, 0},
		"anthropic":           {90 * time.Second, 0},
		"not_found":           {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("routes' per-try timeouts (-want +got):\n%s", diff)
	}
}
