// Package istio_test checks the Istio manifests of this folder (and of
// sidecar/): every document decodes strictly (deploy.Decode; Istio specs
// through protojson), the Envoy configuration inside the EnvoyFilters
// decodes into go-control-plane's types and validates, and the filter,
// routes, providers and buffers agree with the bootstrap modelgate
// generates for its own config.
package istio_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	istioapi "istio.io/api/networking/v1alpha3"

	"modelgate/deploy"
	"modelgate/deploy/deploytest"
)

// The sidecar variant's files, applied after this folder's.
const sidecarDir = "sidecar"

func TestManifests(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	objs, errs := run(readManifests(t), gw)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("checked %s", deploy.KindNames(objs))
}

// Each check can fail: one drift at a time, each must be reported.
func TestChecksFail(t *testing.T) {
	gw := deploytest.LoadGateway(t)
	files := readManifests(t)
	const gwFile, sideFile = "gateway.yaml", "sidecar/sidecar.yaml"
	deploytest.CheckDrifts(t, files, func(files map[string][]byte) []error {
		_, errs := run(files, gw)
		return errs
	}, []deploytest.Drift{
		{Name: "misspelt Istio field", File: gwFile, Old: "workloadSelector:", New: "workloadSelectr:", Want: `unknown field "workloadSelectr"`},
		{Name: "misspelt Envoy field", File: gwFile, Old: "allow_mode_override: true", New: "allow_mode_overide: true", Want: `unknown field "allow_mode_overide"`},
		{Name: "Envoy field out of range", File: gwFile, Old: "message_timeout: 10s", New: "message_timeout: 7200s", Want: "MessageTimeout"},
		{Name: "response body streamed", File: gwFile, Old: "response_body_mode: BUFFERED", New: "response_body_mode: STREAMED", Want: "response_body_mode"},
		{Name: "fail open", File: sideFile, Old: "failure_mode_allow: false", New: "failure_mode_allow: true", Want: "failure_mode_allow"},
		{Name: "ext_proc port", File: gwFile, Old: "outbound|50051||", New: "outbound|50052||", Want: "port 50052"},
		{Name: "headless Service", File: gwFile, Old: "||modelgate-grpc.modelgate", New: "||modelgate-grpc-headless.modelgate", Want: "headless"},
		{Name: "filter enabled everywhere", File: gwFile, Old: "disabled: true", New: "disabled: false", Want: "disabled"},
		{Name: "filter enabled on another host", File: gwFile, Old: "domainName: llm.example.com", New: "domainName: api.example.com", Want: "api.example.com"},
		{Name: "sidecar virtual host", File: sideFile, Old: `name: "llm.modelgate.svc.cluster.local:80"`, New: `name: "llm.modelgate.svc.cluster.local:8080"`, Want: "llm.modelgate.svc.cluster.local:8080"},
		{Name: "listener buffer", File: gwFile, Old: "per_connection_buffer_limit_bytes: 33554432", New: "per_connection_buffer_limit_bytes: 1048576", Want: "per_connection_buffer_limit_bytes"},
		{Name: "ext_proc cluster match", File: sideFile, Old: "portNumber: 50051", New: "portNumber: 50052", Want: "CLUSTER"},
		{Name: "routing header", File: gwFile, Old: "x-modelgate-backend: {exact: openai}", New: "x-modelgate-route: {exact: openai}", Want: "x-modelgate-route"},
		{Name: "backend name", File: sideFile, Old: "x-modelgate-backend: {exact: openai}", New: "x-modelgate-backend: {exact: open-ai}", Want: `no route matches "openai/o3/stream"`},
		{Name: "host rewrite", File: gwFile, Old: "rewrite: {authority: api.openai.com}", New: "rewrite: {authority: openai.com}", Want: "authority"},
		{Name: "header left upstream", File: gwFile, Old: "remove: [x-modelgate-backend, x-modelgate-model, x-modelgate-stream]", New: "remove: [x-modelgate-backend]", Want: "removes"},
		{Name: "route timeout", File: gwFile, Old: "timeout: 0s", New: "timeout: 15s", Want: "timeout"},
		{Name: "per-try timeout", File: sideFile, Old: "perTryTimeout: 300s", New: "perTryTimeout: 30s", Want: "perTryTimeout"},
		{Name: "retry after sending", File: gwFile, Old: `retryOn: "connect-failure,refused-stream"`, New: `retryOn: "5xx,connect-failure"`, Want: "5xx"},
		{Name: "no retries", File: gwFile, Old: "attempts: 1,", New: "attempts: 0,", Want: "attempts"},
		{Name: "not-found body", File: gwFile, Old: "unknown_url", New: "not_found", Want: "catch-all"},
		{Name: "TLS SNI", File: "providers.yaml", Old: "sni: api.openai.com", New: "sni: api.openai.org", Want: "sni"},
		{Name: "provider port", File: "providers.yaml", Old: "targetPort: 443", New: "targetPort: 8443", Want: "8443"},
		{Name: "protocol", File: "providers.yaml", Old: "protocol: HTTP,", New: "protocol: HTPT,", Want: "HTPT"},
		{Name: "network policy", File: "networkpolicy.yaml", Old: "istio: ingressgateway", New: "istio: ingress", Want: "NetworkPolicy"},
		{Name: "Envoy's replies unmarked", File: gwFile, Old: "response_attributes: [response.code_details]", New: "response_attributes: [response.flags]", Want: `response_attributes lacks "response.code_details"`},
		{Name: "client steers retries", File: sideFile, Old: "                    - remove: x-envoy-max-retries\n", New: "", Want: `do not remove ["x-envoy-max-retries"]`},
		{Name: "removal patch changes more", File: gwFile, Old: "            early_header_mutation_extensions:", New: "            stream_idle_timeout: 910s\n            early_header_mutation_extensions:", Want: "want only early_header_mutation_extensions"},
		{Name: "removal on another listener", File: sideFile, Old: "          portNumber: 80\n          filterChain:\n            filter: {name: envoy.filters.network.http_connection_manager}\n      patch:\n        operation: MERGE",
			New: "          portNumber: 8080\n          filterChain:\n            filter: {name: envoy.filters.network.http_connection_manager}\n      patch:\n        operation: MERGE", Want: "NETWORK_FILTER: listener port 8080"},
		{Name: "route idle below a model", File: gwFile, Old: "route: {idle_timeout: 910s}", New: "route: {idle_timeout: 900s}",
			Want: `model o3 on backend openai, non-streamed → VirtualService modelgate/llm http[1] "openai-o3": the EnvoyFilter's route idle_timeout is 15m0s, shorter than 15m10s`},
		{Name: "no route idle", File: sideFile, Old: "route: {idle_timeout: 910s}", New: "route: {}", Want: `http[3] "openai": idle_timeout none (EnvoyFilter HTTP_ROUTE patches)`},
		{Name: "stream idle", File: gwFile, Old: "per_try_idle_timeout: 600s", New: "per_try_idle_timeout: 60s",
			Want: `model o3 on backend openai, streamed → VirtualService modelgate/llm http[0] "openai-o3-stream": the EnvoyFilter's per_try_idle_timeout is 1m0s, shorter than 10m0s`},
		{Name: "patch for a renamed route", File: sideFile, Old: "route: {name: openai-stream}", New: "route: {name: openai-streaming}", Want: `names route "openai-streaming", which it does not have`},
		{Name: "route patch on another host", File: gwFile, Old: "            domainName: llm.example.com\n            route: {action: ROUTE}", New: "            domainName: api.example.com\n            route: {action: ROUTE}",
			Want: "want MERGE into routes of the VIRTUAL_HOST patch's virtual host"},
		{Name: "route patch sets more", File: gwFile, Old: "route: {idle_timeout: 910s}", New: "route: {idle_timeout: 910s, timeout: 15s}", Want: "sets more than route.idle_timeout"},
		{Name: "model per-try timeout", File: sideFile, Old: "perTryTimeout: 900s", New: "perTryTimeout: 300s",
			Want: `model o3 on backend openai, streamed → VirtualService modelgate/llm-mesh http[0] "openai-o3-stream": retries.perTryTimeout is 5m0s, shorter than 15m0s`},
		{Name: "renamed route", File: gwFile, Old: "    - name: openai-o3-stream\n", New: "    - name: openai-o3-streamed\n", Want: `names route "openai-o3-stream", which it does not have`},
	})
}

// The values of string fields Istio validates in istiod, not in the
// schema protojson checks (proto enums such as tls.mode are checked there).
func TestEnumValues(t *testing.T) {
	objs, errs := run(readManifests(t), nil)
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	rows := enumRows(objs)
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.field] = true
		t.Run(r.field+"/"+r.where, func(t *testing.T) {
			if !slices.Contains(r.allowed, r.got) {
				t.Errorf("%s %s: %q is not one of %q", r.where, r.field, r.got, r.allowed)
			}
		})
	}
	for _, f := range []string{"ServiceEntry port protocol", "Gateway server protocol", "VirtualService retryOn"} {
		if !seen[f] {
			t.Errorf("no manifest sets %s", f)
		}
	}
}

// readManifests reads the YAML files of this folder and of sidecar/, by
// path.
func readManifests(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, pattern := range []string{"*.yaml", filepath.Join(sidecarDir, "*.yaml")} {
		paths, err := filepath.Glob(pattern)
		if err != nil || len(paths) == 0 {
			t.Fatalf("no manifests match %s (%v)", pattern, err)
		}
		for _, p := range paths {
			if files[filepath.ToSlash(p)], err = os.ReadFile(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return files
}

// run decodes the manifests and, with gw, checks them.
func run(files map[string][]byte, gw *deploytest.Gateway) ([]deploy.Object, []error) {
	var objs []deploy.Object
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(files)) {
		o, err := deploy.Decode(files[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		objs = append(objs, o...)
	}
	if gw != nil && len(errs) == 0 {
		errs = check(objs, gw)
	}
	return objs, errs
}

// named is an Istio spec with its object's name.
type named[T proto.Message] struct {
	name, namespace string
	spec            T
}

func (n named[T]) String() string { return n.namespace + "/" + n.name }

func find[T proto.Message](objs []deploy.Object) []named[T] {
	var out []named[T]
	for _, o := range objs {
		if v, ok := o.Value.(T); ok {
			out = append(out, named[T]{o.Name, o.Namespace, v})
		}
	}
	return out
}

// check runs every cross-check and returns all problems.
func check(objs []deploy.Object, gw *deploytest.Gateway) []error {
	var errs []error
	for _, r := range enumRows(objs) {
		if !slices.Contains(r.allowed, r.got) {
			errs = append(errs, fmt.Errorf("%s %s: %q is not one of %q", r.where, r.field, r.got, r.allowed))
		}
	}
	errs = append(errs, checkEnvoyFilters(objs, gw)...)
	errs = append(errs, checkVirtualServices(objs, gw)...)
	return append(errs, checkNetworkPolicy(objs, gw)...)
}

type enumRow struct {
	field, where, got string
	allowed           []string
}

// Values istiod accepts: protocols (istio.io/istio pkg/config/protocol,
// matched case-insensitively) and Envoy's retry_on conditions (router
// filter docs, x-envoy-retry-on and x-envoy-retry-grpc-on).
var (
	istioProtocols = []string{"HTTP", "HTTPS", "GRPC", "GRPC-WEB", "HTTP2", "HTTP_PROXY", "MONGO", "MYSQL", "REDIS", "TCP", "TLS", "UDP", "THRIFT"}
	retryOn        = []string{"5xx", "gateway-error", "reset", "reset-before-request", "connect-failure", "envoy-ratelimited",
		"retriable-4xx", "refused-stream", "retriable-status-codes", "retriable-headers", "http3-post-connect-failure",
		"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"}
)

func enumRows(objs []deploy.Object) []enumRow {
	var rows []enumRow
	for _, se := range find[*istioapi.ServiceEntry](objs) {
		for _, p := range se.spec.GetPorts() {
			rows = append(rows, enumRow{"ServiceEntry port protocol", "ServiceEntry " + se.String(), strings.ToUpper(p.GetProtocol()), istioProtocols})
		}
	}
	for _, g := range find[*istioapi.Gateway](objs) {
		for _, s := range g.spec.GetServers() {
			rows = append(rows, enumRow{"Gateway server protocol", "Gateway " + g.String(), strings.ToUpper(s.GetPort().GetProtocol()), istioProtocols})
		}
	}
	for _, vs := range find[*istioapi.VirtualService](objs) {
		for _, r := range vs.spec.GetHttp() {
			for c := range strings.SplitSeq(r.GetRetries().GetRetryOn(), ",") {
				c = strings.TrimSpace(c)
				allowed := retryOn
				if _, err := strconv.Atoi(c); err == nil && len(c) == 3 {
					allowed = []string{c} // a status code
				}
				if c != "" {
					rows = append(rows, enumRow{"VirtualService retryOn", "VirtualService " + vs.String() + " " + r.GetName(), c, allowed})
				}
			}
		}
	}
	return rows
}
