// Package envoygateway_test checks the Envoy Gateway manifests of this
// folder: every document decodes strictly (deploy.Decode) and passes its
// CRD's schema, and what Envoy Gateway would generate from them agrees
// with the bootstrap modelgate generates for its own config (ext_proc
// modes, routes on the routing header, timeouts, buffers, TLS).
package envoygateway_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
)

func TestManifests(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	objs, errs := run(readManifests(t), gw, crdSchemas(t))
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("checked %s", deploy.KindNames(objs))
}

// Each check can fail: one drift at a time, each must be reported.
func TestChecksFail(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	crds := crdSchemas(t)
	files := readManifests(t)
	deploytest.CheckDrifts(t, files, func(files map[string][]byte) []error {
		_, errs := run(files, gw, crds)
		return errs
	}, []deploytest.Drift{
		{Name: "misspelt field", File: "extproc.yaml", Old: "messageTimeout:", New: "messagetimeout:", Want: `unknown field "spec.extProc[0].messagetimeout"`},
		{Name: "enum in the wrong case", File: "extproc.yaml", Old: "body: Buffered", New: "body: buffered", Want: "is not one of"},
		{Name: "request body streamed", File: "extproc.yaml", Old: "body: Buffered", New: "body: Streamed", Want: "request_body_mode"},
		{Name: "no mode override", File: "extproc.yaml", Old: "allowModeOverride: true", New: "allowModeOverride: false", Want: "allow_mode_override"},
		{Name: "fail open", File: "extproc.yaml", Old: "failOpen: false", New: "failOpen: true", Want: "failure_mode_allow"},
		{Name: "message timeout", File: "extproc.yaml", Old: "messageTimeout: 10s", New: "messageTimeout: 200ms", Want: "message_timeout"},
		{Name: "ext_proc port", File: "extproc.yaml", Old: "port: 50051", New: "port: 50052", Want: "port 50052"},
		{Name: "headless Service", File: "extproc.yaml", Old: "name: modelgate-grpc\n", New: "name: modelgate-grpc-headless\n", Want: "headless"},
		{Name: "health check", File: "extproc.yaml", Old: "unhealthyThreshold: 2", New: "unhealthyThreshold: 3", Want: "unhealthy"},
		{Name: "routing header", File: "routes.yaml", Old: "name: x-modelgate-backend, value: openai}", New: "name: x-modelgate-route, value: openai}", Want: "x-modelgate-route"},
		{Name: "backend name", File: "routes.yaml", Old: "value: openai}", New: "value: open-ai}", Want: `no rule matches route "openai"`},
		{Name: "route timeout", File: "routes.yaml", Old: "timeouts: {request: 0s}", New: "timeouts: {request: 15s}", Want: "timeouts.request"},
		{Name: "duration without unit", File: "routes.yaml", Old: "timeouts: {request: 0s}", New: `timeouts: {request: "0"}`, Want: "does not match"},
		{Name: "header left upstream", File: "routes.yaml", Old: "remove: [x-modelgate-backend, x-modelgate-model, x-modelgate-stream]", New: "remove: [x-modelgate-backend]", Want: "removes"},
		{Name: "host rewrite", File: "routes.yaml", Old: "hostname: api.openai.com}", New: "hostname: openai.com}", Want: "hostname"},
		{Name: "per-try timeout", File: "routes.yaml", Old: "timeout: 300s", New: "timeout: 30s", Want: "perRetry.timeout"},
		{Name: "stream idle timeout", File: "routes.yaml", Old: "streamIdleTimeout: 60s", New: "streamIdleTimeout: 90s", Want: "streamIdleTimeout"},
		{Name: "not-found body", File: "routes.yaml", Old: "unknown_url", New: "not_found", Want: "catch-all"},
		{Name: "TLS hostname", File: "providers.yaml", Old: "    hostname: api.openai.com", New: "    hostname: api.openai.org", Want: "BackendTLSPolicy"},
		{Name: "provider port", File: "providers.yaml", Old: "hostname: api.openai.com, port: 443}", New: "hostname: api.openai.com, port: 80}", Want: "api.openai.com:80"},
		{Name: "listener buffer", File: "gateway.yaml", Old: "bufferLimit: 32Mi", New: "bufferLimit: 32Ki", Want: "bufferLimit"},
		{Name: "request timeout", File: "gateway.yaml", Old: "requestReceivedTimeout: 120s", New: "requestReceivedTimeout: 60s", Want: "request_timeout"},
		{Name: "listener idle below a model", File: "gateway.yaml", Old: "streamIdleTimeout: 910s", New: "streamIdleTimeout: 900s",
			Want: "model o3 on backend openai, non-streamed → HTTPRoute modelgate-o3 rules[0]: ClientTrafficPolicy llm timeout.http.streamIdleTimeout is 15m0s, shorter than 15m10s"},
		{Name: "listener idle unset", File: "gateway.yaml", Old: "      streamIdleTimeout: 910s\n", New: "", Want: "streamIdleTimeout: unset"},
		{Name: "client steers retries", File: "gateway.yaml", Old: "        - x-envoy-max-retries\n", New: "", Want: `earlyRequestHeaders.remove lacks ["x-envoy-max-retries"]`},
		{Name: "removed late", File: "gateway.yaml", Old: "    earlyRequestHeaders:\n", New: "    lateResponseHeaders:\n", Want: `earlyRequestHeaders.remove lacks ["x-envoy-`},
		{Name: "Envoy's replies unmarked", File: "extproc.yaml", Old: "attributes: [response.code_details]", New: "attributes: [response.flags]", Want: `lacks "response.code_details"`},
		{Name: "attribute outside the CRD's pattern", File: "extproc.yaml", Old: "attributes: [response.code_details]", New: "attributes: [response.code-details]", Want: "does not match"},
		{Name: "model per-try timeout", File: "routes.yaml", Old: "timeout: 900s", New: "timeout: 300s",
			Want: "model o3 on backend openai, non-streamed → HTTPRoute modelgate-o3 rules[0]: BackendTrafficPolicy modelgate-o3 retry.perRetry.timeout is 5m0s, shorter than 15m0s"},
		{Name: "model stream idle", File: "routes.yaml", Old: "streamIdleTimeout: 600s", New: "streamIdleTimeout: 60s",
			Want: "model o3 on backend openai, streamed → HTTPRoute modelgate-o3-stream rules[0]: BackendTrafficPolicy modelgate-o3-stream timeout.http.streamIdleTimeout (the route's idle_timeout) is 1m0s, shorter than 10m0s"},
		{Name: "model rules missing", File: "routes.yaml", Old: "name: x-modelgate-model, value: o3}\n      filters:", New: "name: x-modelgate-model, value: o4}\n      filters:",
			Want: `no rule matches route "openai/o3"`},
		{Name: "stream idle on a non-streaming rule", File: "routes.yaml", Old: "    tcp:\n      connectTimeout: 5s\n  connection:", New: "    tcp:\n      connectTimeout: 5s\n    http:\n      streamIdleTimeout: 60s\n  connection:",
			Want: "model gpt-4o on backend openai, non-streamed → HTTPRoute modelgate rules[0]: BackendTrafficPolicy modelgate timeout.http.streamIdleTimeout (the route's idle_timeout) is 1m0s, shorter than 5m10s"},
	})
}

// The enum values the manifests use, against the API packages' own
// constants: kubebuilder enums are not checked by decoding. Where the
// checks above understand only some of an enum's values (filter types,
// listener protocols), the allowed set is those.
func TestEnumValues(t *testing.T) {
	objs, errs := run(readManifests(t), nil, nil)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	bodyModes := []string{string(egv1a1.StreamedExtProcBodyProcessingMode), string(egv1a1.BufferedExtProcBodyProcessingMode),
		string(egv1a1.BufferedPartialExtBodyHeaderProcessingMode), string(egv1a1.FullDuplexStreamedExtBodyProcessingMode)}
	type row struct{ where, got string }
	tests := []struct {
		field   string
		allowed []string
		rows    []row
	}{
		{field: "EnvoyExtensionPolicy processingMode body", allowed: bodyModes},
		{field: "HTTPRoute path match type", allowed: []string{string(gwapiv1.PathMatchExact), string(gwapiv1.PathMatchPathPrefix), string(gwapiv1.PathMatchRegularExpression)}},
		{field: "HTTPRoute header match type", allowed: []string{string(gwapiv1.HeaderMatchExact), string(gwapiv1.HeaderMatchRegularExpression)}},
		{field: "HTTPRoute filter type", allowed: []string{string(gwapiv1.HTTPRouteFilterRequestHeaderModifier), string(gwapiv1.HTTPRouteFilterURLRewrite), string(gwapiv1.HTTPRouteFilterExtensionRef)}},
		{field: "Gateway listener protocol", allowed: []string{string(gwapiv1.HTTPProtocolType), string(gwapiv1.HTTPSProtocolType)}},
		{field: "BackendTLSPolicy wellKnownCACertificates", allowed: []string{string(gwapiv1.WellKnownCACertificatesSystem)}},
		{field: "HTTPRouteFilter body type", allowed: []string{string(egv1a1.ResponseValueTypeInline), string(egv1a1.ResponseValueTypeValueRef)}},
		{field: "active health check type", allowed: []string{string(egv1a1.ActiveHealthCheckerTypeHTTP), string(egv1a1.ActiveHealthCheckerTypeTCP), string(egv1a1.ActiveHealthCheckerTypeGRPC)}},
	}
	add := func(field, where string, got *string) {
		for i := range tests {
			if tests[i].field == field && got != nil {
				tests[i].rows = append(tests[i].rows, row{where, *got})
			}
		}
	}
	for _, p := range deploy.Find[*egv1a1.EnvoyExtensionPolicy](objs) {
		for i, ep := range p.Spec.ExtProc {
			if pm := ep.ProcessingMode; pm != nil {
				for dir, o := range map[string]*egv1a1.ProcessingModeOptions{"request": pm.Request, "response": pm.Response} {
					if o != nil && o.Body != nil {
						add("EnvoyExtensionPolicy processingMode body", fmt.Sprintf("%s extProc[%d] %s", p.Name, i, dir), (*string)(o.Body))
					}
				}
			}
			if hc := ep.BackendSettings.HealthCheck; hc != nil && hc.Active != nil {
				add("active health check type", p.Name, (*string)(&hc.Active.Type))
			}
		}
	}
	for _, r := range deploy.Find[*gwapiv1.HTTPRoute](objs) {
		for i, rule := range r.Spec.Rules {
			at := fmt.Sprintf("%s rules[%d]", r.Name, i)
			for _, m := range rule.Matches {
				if m.Path != nil {
					add("HTTPRoute path match type", at, (*string)(m.Path.Type))
				}
				for _, h := range m.Headers {
					add("HTTPRoute header match type", at, (*string)(h.Type))
				}
			}
			for _, f := range rule.Filters {
				add("HTTPRoute filter type", at, (*string)(&f.Type))
			}
		}
	}
	for _, g := range deploy.Find[*gwapiv1.Gateway](objs) {
		for _, l := range g.Spec.Listeners {
			add("Gateway listener protocol", g.Name+" "+string(l.Name), (*string)(&l.Protocol))
		}
	}
	for _, p := range deploy.Find[*gwapiv1.BackendTLSPolicy](objs) {
		add("BackendTLSPolicy wellKnownCACertificates", p.Name, (*string)(p.Spec.Validation.WellKnownCACertificates))
	}
	for _, f := range deploy.Find[*egv1a1.HTTPRouteFilter](objs) {
		if dr := f.Spec.DirectResponse; dr != nil && dr.Body != nil {
			add("HTTPRouteFilter body type", f.Name, (*string)(dr.Body.Type))
		}
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			if len(tt.rows) == 0 {
				t.Fatalf("no manifest sets %s", tt.field)
			}
			for _, r := range tt.rows {
				if !slices.Contains(tt.allowed, r.got) {
					t.Errorf("%s: %q is not one of %q", r.where, r.got, tt.allowed)
				}
			}
		})
	}
}

// readManifests reads the YAML files of this folder by name.
func readManifests(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests here (%v)", err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		if files[p], err = os.ReadFile(p); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// run decodes the manifests and, with gw, checks them; without crds the
// schemas are not checked.
func run(files map[string][]byte, gw *deploytest.Gateway, crds map[string]*schema) ([]deploy.Object, []error) {
	var objs []deploy.Object
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for i, doc := range deploy.SplitDocuments(files[name]) {
			decoded, err := deploy.Decode(doc)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s document %d: %s", name, i, strings.TrimPrefix(err.Error(), "document 0: ")))
				continue
			}
			o := decoded[0]
			objs = append(objs, o)
			if crds == nil {
				continue
			}
			found, cerrs := validateCRD(crds, doc)
			if !found && strings.Contains(o.APIVersion, ".") {
				errs = append(errs, fmt.Errorf("%s: %s/%s has no CRD in Envoy Gateway's or Gateway API's standard channel", name, o.APIVersion, o.Kind))
			}
			for _, e := range cerrs {
				errs = append(errs, fmt.Errorf("%s: CRD schema: %w", name, e))
			}
		}
	}
	if gw != nil && len(errs) == 0 {
		errs = check(objs, gw)
	}
	return objs, errs
}
