// Package istio_test checks the Istio manifests of this folder (and of
// sidecar/): every document decodes strictly (deploy.Decode; Istio specs
// through protojson), the Envoy configuration inside the EnvoyFilters
// decodes into go-control-plane's types and validates, and the filter,
// routes, providers and buffers agree with the bootstrap modelgate
// generates for its own config.
package istio_test

import (
	"bytes"
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
	tests := []struct {
		name, file, old, new, want string
	}{
		{"misspelt Istio field", gwFile, "workloadSelector:", "workloadSelectr:", `unknown field "workloadSelectr"`},
		{"misspelt Envoy field", gwFile, "allow_mode_override: true", "allow_mode_overide: true", `unknown field "allow_mode_overide"`},
		{"Envoy field out of range", gwFile, "message_timeout: 10s", "message_timeout: 7200s", "MessageTimeout"},
		{"response body streamed", gwFile, "response_body_mode: BUFFERED", "response_body_mode: STREAMED", "response_body_mode"},
		{"fail open", sideFile, "failure_mode_allow: false", "failure_mode_allow: true", "failure_mode_allow"},
		{"ext_proc port", gwFile, "outbound|50051||", "outbound|50052||", "port 50052"},
		{"headless Service", gwFile, "||modelgate-grpc.modelgate", "||modelgate-grpc-headless.modelgate", "headless"},
		{"filter enabled everywhere", gwFile, "disabled: true", "disabled: false", "disabled"},
		{"filter enabled on another host", gwFile, "domainName: llm.example.com", "domainName: api.example.com", "api.example.com"},
		{"sidecar virtual host", sideFile, `name: "llm.modelgate.svc.cluster.local:80"`, `name: "llm.modelgate.svc.cluster.local:8080"`, "llm.modelgate.svc.cluster.local:8080"},
		{"listener buffer", gwFile, "per_connection_buffer_limit_bytes: 33554432", "per_connection_buffer_limit_bytes: 1048576", "per_connection_buffer_limit_bytes"},
		{"ext_proc cluster match", sideFile, "portNumber: 50051", "portNumber: 50052", "CLUSTER"},
		{"routing header", gwFile, "x-modelgate-backend: {exact: openai}", "x-modelgate-route: {exact: openai}", "x-modelgate-route"},
		{"backend name", sideFile, "x-modelgate-backend: {exact: openai}", "x-modelgate-backend: {exact: open-ai}", `no route matches "openai"`},
		{"host rewrite", gwFile, "rewrite: {authority: api.openai.com}", "rewrite: {authority: openai.com}", "authority"},
		{"header left upstream", gwFile, "remove: [x-modelgate-backend, x-modelgate-model, x-modelgate-stream]", "remove: [x-modelgate-backend]", "removes"},
		{"route timeout", gwFile, "timeout: 0s", "timeout: 15s", "timeout"},
		{"per-try timeout", sideFile, "perTryTimeout: 300s", "perTryTimeout: 30s", "perTryTimeout"},
		{"retry after sending", gwFile, `retryOn: "connect-failure,refused-stream"`, `retryOn: "5xx,connect-failure"`, "5xx"},
		{"no retries", gwFile, "attempts: 1,", "attempts: 0,", "attempts"},
		{"not-found body", gwFile, "unknown_url", "not_found", "catch-all"},
		{"TLS SNI", "providers.yaml", "sni: api.openai.com", "sni: api.openai.org", "sni"},
		{"provider port", "providers.yaml", "targetPort: 443", "targetPort: 8443", "8443"},
		{"protocol", "providers.yaml", "protocol: HTTP,", "protocol: HTPT,", "HTPT"},
		{"network policy", "networkpolicy.yaml", "istio: ingressgateway", "istio: ingress", "NetworkPolicy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := map[string][]byte{}
			for k, v := range files {
				changed[k] = v
			}
			if !bytes.Contains(files[tt.file], []byte(tt.old)) {
				t.Fatalf("%s has no %q", tt.file, tt.old)
			}
			changed[tt.file] = bytes.Replace(files[tt.file], []byte(tt.old), []byte(tt.new), 1)
			_, errs := run(changed, gw)
			err := errors.Join(errs...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("after %q → %q in %s: got %v, want an error with %q", tt.old, tt.new, tt.file, err, tt.want)
				return
			}
			t.Logf("reported: %v", err)
		})
	}
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
