// Package helm_test renders the chart in modelgate/ with Helm's Go
// library (no cluster, no helm binary), decodes every rendered document
// strictly and runs the plain manifests' cross-checks on it.
package helm_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/resource"

	"modelgate/authz/pricing"
	"modelgate/deploy"
	"modelgate/deploy/kubernetes"
	"modelgate/extproc/config"
)

const chartDir = "modelgate"

// kubeVersion is the cluster version rendered for; the chart needs 1.30.
const kubeVersion = "v1.33.0"

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return chrt
}

// render installs the chart client-only, as `helm template` does, and
// returns the manifest and the NOTES.
func render(t *testing.T, release, namespace, kube string, vals map[string]any) (manifest, notes string, err error) {
	t.Helper()
	inst := action.NewInstall(&action.Configuration{Log: t.Logf})
	inst.DryRun, inst.ClientOnly = true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	if inst.KubeVersion, err = chartutil.ParseKubeVersion(kube); err != nil {
		t.Fatal(err)
	}
	rel, err := inst.Run(loadChart(t), vals)
	if err != nil {
		return "", "", err
	}
	return rel.Manifest, rel.Info.Notes, nil
}

// decode decodes each rendered template strictly and runs the checks.
func decode(t *testing.T, manifest string) ([]deploy.Object, *kubernetes.Summary, error) {
	t.Helper()
	var objs []deploy.Object
	for _, doc := range releaseutil.SplitManifests(manifest) {
		o, err := deploy.Decode([]byte(doc))
		if err != nil {
			source, _, _ := strings.Cut(doc[strings.Index(doc, "# Source: ")+1:], "\n")
			return nil, nil, fmt.Errorf("%s: %w", source, err)
		}
		objs = append(objs, o...)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Kind+objs[i].Name < objs[j].Kind+objs[j].Name })
	s, err := kubernetes.Check(objs)
	return objs, s, err
}

// values reads YAML-ish test values written as JSON.
func values(t *testing.T, js string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(js), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func serviceNames(s *kubernetes.Summary) map[string]bool {
	out := map[string]bool{}
	for _, svc := range s.Services {
		out[svc.Name] = svc.Headless
	}
	return out
}

// Each shipped combination of values renders objects that decode strictly
// and pass the cross-checks; each case then checks what its values change.
func TestRender(t *testing.T) {
	for _, tc := range []struct {
		name, release, namespace, values string
		check                            func(t *testing.T, s *kubernetes.Summary)
	}{
		{name: "defaults", values: `{}`, check: func(t *testing.T, s *kubernetes.Summary) {
			if s.Replicas != 1 || s.SQLiteVolume != "/data" || s.Config.Storage.PostgresURLEnv != "" {
				t.Errorf("want one replica on SQLite in /data, got %d replicas, volume %q, postgres %q", s.Replicas, s.SQLiteVolume, s.Config.Storage.PostgresURLEnv)
			}
			if want := map[string]bool{"modelgate-grpc": false, "modelgate-grpc-headless": true}; !reflect.DeepEqual(serviceNames(s), want) || s.ExtProcService != "modelgate-grpc-headless" {
				t.Errorf("Services %v, ext_proc Service %s; want %v and the headless one", serviceNames(s), s.ExtProcService, want)
			}
			if !slices.Equal(s.AdmittedPorts, []int32{s.GRPCPort}) || s.AdminPeers != 0 {
				t.Errorf("NetworkPolicy admits %v (admin from %d peers), want only the grpc port", s.AdmittedPorts, s.AdminPeers)
			}
		}},
		{name: "postgresql and replicas", values: `{"replicaCount": 3, "postgresql": {"enabled": true, "secretName": "pg-app", "secretKey": "uri"}}`,
			check: func(t *testing.T, s *kubernetes.Summary) {
				if s.Replicas != 3 || s.SQLiteVolume != "" || s.SecretEnv[s.Config.Storage.PostgresURLEnv] != "pg-app/uri" {
					t.Errorf("want 3 replicas on PostgreSQL from pg-app/uri, got %d, volume %q, env %v", s.Replicas, s.SQLiteVolume, s.SecretEnv)
				}
			}},
		{name: "headless off", values: `{"service": {"headless": false}}`, check: func(t *testing.T, s *kubernetes.Summary) {
			if want := map[string]bool{"modelgate-grpc": false}; !reflect.DeepEqual(serviceNames(s), want) || s.ExtProcService != "modelgate-grpc" {
				t.Errorf("Services %v, ext_proc Service %s; want only the ClusterIP one", serviceNames(s), s.ExtProcService)
			}
		}},
		{name: "redis, gRPC readiness, other ports, metrics peers", values: `{"replicaCount": 2, "postgresql": {"enabled": true},
			"redis": {"enabled": true}, "readinessProbe": {"type": "grpc"}, "ports": {"grpc": 9000, "admin": 9001},
			"existingSecret": "llm-keys",
			"networkPolicy": {"metricsPeers": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}}`,
			check: func(t *testing.T, s *kubernetes.Summary) {
				if s.GRPCPort != 9000 || s.AdminPort != 9001 || s.Readiness != (kubernetes.Probe{Kind: "grpc", Port: 9000}) {
					t.Errorf("ports %d/%d, readiness %v", s.GRPCPort, s.AdminPort, s.Readiness)
				}
				if s.Config.RateLimits.Store != "redis" || s.SecretEnv[s.Config.RateLimits.RedisURLEnv] != "llm-keys/redis-url" {
					t.Errorf("rate limits %+v, secret env %v", s.Config.RateLimits, s.SecretEnv)
				}
				if !slices.Equal(s.AdmittedPorts, []int32{9000, 9001}) || s.AdminPeers != 1 {
					t.Errorf("NetworkPolicy admits %v, admin from %d peers", s.AdmittedPorts, s.AdminPeers)
				}
			}},
		{name: "other release and namespace", release: "gw", namespace: "llm", values: `{"shutdownGraceSeconds": 1800}`,
			check: func(t *testing.T, s *kubernetes.Summary) {
				if s.Namespace != "llm" || s.ExtProcService != "gw-modelgate-grpc-headless" || s.Config.Envoy.ExtProcAddress != "gw-modelgate-grpc-headless.llm.svc.cluster.local:50051" {
					t.Errorf("namespace %s, ext_proc %s", s.Namespace, s.Config.Envoy.ExtProcAddress)
				}
				if s.ShutdownGrace != 30*time.Minute || s.TerminationGrace != 30*time.Minute+60*time.Second {
					t.Errorf("shutdown grace %v, termination grace %v", s.ShutdownGrace, s.TerminationGrace)
				}
				if s.SecretEnv["OPENAI_API_KEY"] != "gw-modelgate/openai-api-key" {
					t.Errorf("secret env %v: want the release's Secret by default", s.SecretEnv)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release, namespace := or(tc.release, "modelgate"), or(tc.namespace, "modelgate")
			manifest, notes, err := render(t, release, namespace, kubeVersion, values(t, tc.values))
			if err != nil {
				t.Fatal(err)
			}
			_, s, err := decode(t, manifest)
			if err != nil {
				t.Fatalf("%v\n%s", err, manifest)
			}
			tc.check(t, s)
			if s.SecretEnv[s.Config.Admin.TokenEnv] == "" {
				t.Errorf("the admin token %s is not taken from a Secret: %v", s.Config.Admin.TokenEnv, s.SecretEnv)
			}
			for _, want := range []string{s.ExtProcService, fmt.Sprint(s.GRPCPort), "/v1/models"} {
				if !strings.Contains(notes, want) {
					t.Errorf("NOTES lack %q:\n%s", want, notes)
				}
			}
		})
	}
}

// Misspelt or invalid values, and a cluster too old, fail the install.
func TestInvalidValues(t *testing.T) {
	for _, tc := range []struct{ name, values, kube, want string }{
		{"misspelt value", `{"replicaCont": 3}`, kubeVersion, "additional properties 'replicaCont' not allowed"},
		{"misspelt nested value", `{"postgresql": {"enable": true}}`, kubeVersion, "additional properties 'enable' not allowed"},
		{"replicas on SQLite", `{"replicaCount": 2}`, kubeVersion, "'/replicaCount': maximum: got 2, want 1"},
		{"readiness type", `{"readinessProbe": {"type": "tcp"}}`, kubeVersion, "'/readinessProbe/type': value must be one of"},
		{"port", `{"ports": {"grpc": 70000}}`, kubeVersion, "'/ports/grpc': maximum"},
		{"misspelt config key", `{"config": {"backends": [{"name": "openai", "provider": "openai", "base_url": "https://api.openai.com", "api_key_evn": "K"}], "models": [{"id": "m", "deployments": [{"backend": "openai", "model": "m"}]}]}}`,
			kubeVersion, "additional properties 'api_key_evn' not allowed"},
		{"config key the chart sets", `{"config": {"storage": {"sqlite_path": "/tmp/x.db"}}}`, kubeVersion, "additional properties 'sqlite_path' not allowed"},
		{"config duration", `{"config": {"envoy": {"message_timeout": "10 seconds"}}}`, kubeVersion, "'/config/envoy/message_timeout': '10 seconds' does not match pattern"},
		{"old cluster", `{}`, "v1.29.0", "chart requires kubeVersion"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := render(t, "modelgate", "modelgate", tc.kube, values(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A rendering that breaks a cross-check fails: the checks run on what the
// chart renders, not on the templates.
func TestRenderedChecksCanFail(t *testing.T) {
	manifest, _, err := render(t, "modelgate", "modelgate", kubeVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ old, new, want string }{
		{"containerPort: 50051", "containerPort: 50052", "container ports"},
		{"runAsUser: 65532", "runAsUser: 1000", "runAsUser"},
		{"readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", "unknown field"},
	} {
		if strings.Count(manifest, m.old) != 1 {
			t.Fatalf("%q is not in the rendering once", m.old)
		}
		_, _, err := decode(t, strings.Replace(manifest, m.old, m.new, 1))
		if err == nil || !strings.Contains(err.Error(), m.want) {
			t.Errorf("%s → %s: got %v, want %q", m.old, m.new, err, m.want)
		}
	}
}

// helm lint --strict passes for the shipped combinations.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, vals := range []string{`{}`, `{"replicaCount": 3, "postgresql": {"enabled": true}, "redis": {"enabled": true}, "service": {"headless": false}}`} {
		lint := action.NewLint()
		lint.Strict, lint.Namespace, lint.KubeVersion = true, "modelgate", kv
		res := lint.Run([]string{chartDir}, values(t, vals))
		for _, m := range res.Messages {
			t.Logf("%s: %v", vals, m)
		}
		if len(res.Errors) > 0 || res.TotalChartsLinted != 1 {
			t.Errorf("lint %s: %v", vals, res.Errors)
		}
	}
	// Lint fails too: a misspelt value.
	lint := action.NewLint()
	lint.Strict, lint.KubeVersion = true, kv
	if res := lint.Run([]string{chartDir}, map[string]any{"replicaCont": 3}); len(res.Errors) == 0 {
		t.Error("lint accepts replicaCont")
	}
}

// The default rendering has the plain manifests' kinds and key fields;
// with the plain manifests' choices (PostgreSQL, three replicas) it has
// all of them.
func TestSameAsPlainManifests(t *testing.T) {
	var plain []deploy.Object
	names, _ := fs.Glob(kubernetes.Files, "*.yaml")
	for _, n := range names {
		b, err := fs.ReadFile(kubernetes.Files, n)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := deploy.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		plain = append(plain, objs...)
	}
	want, err := kubernetes.Check(plain)
	if err != nil {
		t.Fatal(err)
	}
	// The chart leaves the Namespace to helm install --create-namespace.
	want.Kinds = slices.DeleteFunc(want.Kinds, func(k string) bool { return strings.HasPrefix(k, "Namespace/") })
	quantities := cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

	manifest, _, err := render(t, "modelgate", "modelgate", kubeVersion, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, got, err := decode(t, manifest)
	if err != nil {
		t.Fatal(err)
	}
	// Defaults differ only in storage: SQLite and so one replica.
	key := func(s *kubernetes.Summary) any {
		return []any{s.Kinds, s.Namespace, s.ConfigPath, s.Image, s.Selector, s.GRPCPort, s.AdminPort, s.Readiness, s.Liveness, s.Startup,
			s.ShutdownGrace, s.PreStopSleep, s.TerminationGrace, s.Services, s.ExtProcService, s.AdmittedPorts, s.AdminPeers,
			s.MaxUnavailable, s.Resources, s.SecretEnv["OPENAI_API_KEY"], s.SecretEnv["MODELGATE_ADMIN_TOKEN"],
			s.Config.Server, s.Config.Envoy, s.Config.Limits, s.Config.Backends, s.Config.Models, s.Config.RateLimits, s.Config.Admin}
	}
	if d := cmp.Diff(key(want), key(got), quantities); d != "" {
		t.Errorf("default rendering vs plain manifests (-plain +chart):\n%s", d)
	}

	manifest, _, err = render(t, "modelgate", "modelgate", kubeVersion, values(t, `{"replicaCount": 3, "postgresql": {"enabled": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err = decode(t, manifest); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, quantities); d != "" {
		t.Errorf("PostgreSQL rendering vs plain manifests (-plain +chart):\n%s", d)
	}
}

// chartSets are the config keys the chart fills in itself, which
// values.schema.json leaves out of `config`.
var chartSets = []string{"server", "envoy.ext_proc_address", "storage.sqlite_path", "storage.postgres_url_env",
	"rate_limits.store", "rate_limits.redis_url_env", "admin.token_env"}

// The schema of `config` lists exactly the keys of the gateway's config
// (less chartSets), with matching types: a key added to the gateway, or a
// misspelling in the schema, fails here.
func TestSchemaMatchesConfig(t *testing.T) {
	data, err := os.ReadFile(chartDir + "/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	root := schema["properties"].(map[string]any)["config"].(map[string]any)
	compareSchema(t, schema, root, reflect.TypeFor[config.Config](), "")
}

func compareSchema(t *testing.T, schema, node map[string]any, typ reflect.Type, at string) {
	t.Helper()
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if ref, ok := node["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		node = schema["definitions"].(map[string]any)[name].(map[string]any)
	}
	// Written as strings in the file: durations, amounts and price dates.
	want := map[reflect.Type]string{reflect.TypeFor[config.Duration](): "string", reflect.TypeFor[pricing.Nanos](): "string",
		reflect.TypeFor[time.Time](): "string"}[typ]
	if want == "" {
		want = map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Int: "integer", reflect.Int64: "integer", reflect.Float64: "number",
			reflect.Struct: "object", reflect.Slice: "array"}[typ.Kind()]
	}
	if variants, ok := node["oneOf"].([]any); ok { // a key written two ways (an alias: a name, or {name, listed}): the one of the Go type
		for _, v := range variants {
			if v := v.(map[string]any); v["type"] == want {
				node = v
			}
		}
	}
	if node["type"] != want {
		t.Errorf("config%s: schema type %v, Go type %s (%s)", at, node["type"], typ, want)
		return
	}
	switch typ.Kind() {
	case reflect.Slice:
		compareSchema(t, schema, node["items"].(map[string]any), typ.Elem(), at+"[]")
	case reflect.Struct:
		if typ == reflect.TypeFor[config.Duration]() || typ == reflect.TypeFor[time.Time]() {
			return
		}
		if node["additionalProperties"] != false {
			t.Errorf("config%s: set additionalProperties false", at)
		}
		props := map[string]any{}
		for k, v := range node["properties"].(map[string]any) {
			props[k] = v
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			path := strings.TrimPrefix(at+"."+key, ".")
			p, ok := props[key]
			if slices.Contains(chartSets, path) {
				if ok {
					t.Errorf("config.%s is set by the chart, yet the schema lets values set it", path)
				}
				continue
			}
			if !ok {
				t.Errorf("config.%s (Go %s.%s) is missing from values.schema.json", path, typ.Name(), f.Name)
				continue
			}
			delete(props, key)
			compareSchema(t, schema, p.(map[string]any), f.Type, "."+path)
		}
		for key := range props {
			t.Errorf("values.schema.json has config%s.%s, which the gateway's config lacks", at, key)
		}
	}
}
