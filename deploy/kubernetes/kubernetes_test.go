package kubernetes_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"modelgate/deploy"
	"modelgate/deploy/kubernetes"
)

// plain returns the manifests as one YAML stream, and file by file.
func plain(t *testing.T) (string, map[string]string) {
	t.Helper()
	names, err := fs.Glob(kubernetes.Files, "*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	files := map[string]string{}
	var all []string
	for _, n := range names {
		b, err := fs.ReadFile(kubernetes.Files, n)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = string(b)
		all = append(all, string(b))
	}
	return strings.Join(all, "\n---\n"), files
}

func check(stream string) (*kubernetes.Summary, error) {
	objs, err := deploy.Decode([]byte(stream))
	if err != nil {
		return nil, err
	}
	return kubernetes.Check(objs)
}

// Every file decodes strictly on its own, and together they pass the
// cross-checks.
func TestManifests(t *testing.T) {
	stream, files := plain(t)
	for name, text := range files {
		objs, err := deploy.Decode([]byte(text))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if len(objs) == 0 {
			t.Errorf("%s: no objects", name)
		}
	}
	s, err := check(stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("objects: %s", strings.Join(s.Kinds, ", "))

	// What the plain manifests choose among what Check allows.
	for _, k := range []string{"Namespace/modelgate", "ConfigMap/modelgate", "Deployment/modelgate", "PodDisruptionBudget/modelgate",
		"NetworkPolicy/modelgate", "Service/modelgate-grpc", "Service/modelgate-grpc-headless"} {
		if !slices.Contains(s.Kinds, k) {
			t.Errorf("missing %s", k)
		}
	}
	if s.Config.Storage.PostgresURLEnv == "" || s.SQLiteVolume != "" {
		t.Errorf("want PostgreSQL storage and no data volume, got postgres_url_env %q, volume %q", s.Config.Storage.PostgresURLEnv, s.SQLiteVolume)
	}
	if s.Replicas < 2 {
		t.Errorf("replicas %d: run several behind Envoy", s.Replicas)
	}
	if want := (kubernetes.Probe{Kind: "http", Path: kubernetes.ReadyPath, Port: s.AdminPort}); s.Readiness != want {
		t.Errorf("readiness %v, want %v", s.Readiness, want)
	}
	if !slices.Equal(s.AdmittedPorts, []int32{s.GRPCPort}) || s.AdminPeers != 0 {
		t.Errorf("NetworkPolicy admits ports %v (admin from %d peers), want only grpc %d", s.AdmittedPorts, s.AdminPeers, s.GRPCPort)
	}
	headless := map[string]bool{}
	for _, svc := range s.Services {
		headless[svc.Name] = svc.Headless
	}
	if !headless[s.ExtProcService] {
		t.Errorf("envoy.ext_proc_address names Service/%s: want the headless one, for a self-managed Envoy", s.ExtProcService)
	}
	if want := map[string]bool{"modelgate-grpc": false, "modelgate-grpc-headless": true}; !equalMaps(headless, want) {
		t.Errorf("Services (name: headless) %v, want %v", headless, want)
	}
	backend := s.Config.Backends[0]
	if len(s.Config.Backends) != 1 || backend.Provider != "openai" || s.SecretEnv[backend.APIKeyEnv] == "" {
		t.Errorf("want one OpenAI backend with its key from a Secret, got %+v, secret env %v", s.Config.Backends, s.SecretEnv)
	}
}

func equalMaps[K, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// The pods run as uid/gid 65532 because the image's final stage is
// distroless "nonroot" and switches to that user.
func TestDockerfileUser(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from, user string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			from, user = f[1], ""
		case "USER":
			user = f[1]
		}
	}
	// USER nonroot, 65532 or 65532:65532.
	uid, gid, _ := strings.Cut(user, ":")
	nonRoot := func(id string) bool { return id == "nonroot" || id == strconv.Itoa(kubernetes.NonRootUID) }
	if !strings.HasPrefix(from, "gcr.io/distroless/") || !strings.HasSuffix(from, ":nonroot") || !nonRoot(uid) || gid != "" && !nonRoot(gid) {
		t.Errorf("final stage FROM %s, USER %s: the manifests assume distroless nonroot (uid/gid %d)", from, user, kubernetes.NonRootUID)
	}
}

// mutation changes the manifests once; the checks must then fail.
type mutation struct {
	name, old, new, want string
}

// mutations proves that each check can fail: a misspelt field, a wrong
// port, a short grace period... each makes Decode or Check report it.
var mutations = []mutation{
	{"misspelt field", "readOnlyRootFilesystem: true", "readOnlyRootFileSystem: true", `unknown field "spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem"`},
	{"misspelt config key", "postgres_url_env:", "postgres_url_evn:", "storage.postgres_url_evn"},
	{"grpc container port", "containerPort: 50051", "containerPort: 50052", "container ports"},
	{"admin listen port", "admin_listen: 0.0.0.0:8081", "admin_listen: 0.0.0.0:8082", "container ports"},
	{"loopback listener", "grpc_listen: 0.0.0.0:50051", "grpc_listen: 127.0.0.1:50051", "listen on 0.0.0.0"},
	{"readiness path", "path: /readyz", "path: /ready", "readinessProbe"},
	{"liveness port", "httpGet: {path: /healthz, port: admin}\n            periodSeconds: 10", "httpGet: {path: /healthz, port: grpc}\n            periodSeconds: 10", "livenessProbe"},
	{"grace period", "terminationGracePeriodSeconds: 1020", "terminationGracePeriodSeconds: 970", "must cover preStop sleep"},
	{"shutdown grace", "shutdown_grace: 16m", "shutdown_grace: 17m", "must cover preStop sleep"},
	{"shutdown grace below a model", "shutdown_grace: 16m", "shutdown_grace: 10m", "shorter than model o3's timeouts.response_headers"},
	{"no preStop", "preStop:\n              sleep: {seconds: 15}", "postStart:\n              sleep: {seconds: 15}", "lifecycle.preStop.sleep"},
	{"root user", "runAsUser: 65532", "runAsUser: 0", "runAsUser and runAsGroup 65532"},
	{"writable root", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
	{"service targetPort", "targetPort: grpc\n      protocol: TCP\n      appProtocol: grpc\n---", "targetPort: admin\n      protocol: TCP\n      appProtocol: grpc\n---", "targetPort admin is container port 8081"},
	{"ext_proc address", "ext_proc_address: modelgate-grpc-headless.", "ext_proc_address: modelgate-ext.", `no Service "modelgate-ext"`},
	{"ext_proc port", "svc.cluster.local:50051", "svc.cluster.local:50052", "listens on 50051"},
	{"network policy port", "protocol: TCP\n          port: 50051", "protocol: TCP\n          port: 8081", "the grpc port 50051 is not admitted"},
	{"network policy open", "    - from:\n", "    - ports: [{port: 8081}]\n    - from:\n", "no from admits every source"},
	{"secret env", "- name: OPENAI_API_KEY", "- name: OPENAI_KEY", "the config names OPENAI_API_KEY, which is not set"},
	{"optional secret", "{name: modelgate, key: postgres-url}", "{name: modelgate, key: postgres-url, optional: true}", "must not be optional"},
	{"sqlite with replicas", "postgres_url_env: MODELGATE_POSTGRES_URL", "sqlite_path: /data/modelgate.db", "each pod would have its own keys"},
	{"committed secret", "kind: Namespace\nmetadata:\n  name: modelgate\n", "kind: Secret\nmetadata:\n  name: modelgate\n  namespace: modelgate\n", "never committed"},
	{"namespace", "kind: PodDisruptionBudget\nmetadata:\n  name: modelgate\n  namespace: modelgate", "kind: PodDisruptionBudget\nmetadata:\n  name: modelgate\n  namespace: default", `PodDisruptionBudget/modelgate: namespace "default"`},
	{"pdb selector", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: modelgate", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: other", "PodDisruptionBudget/modelgate: selector"},
}

func TestChecksCanFail(t *testing.T) {
	stream, _ := plain(t)
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if n := strings.Count(stream, m.old); n != 1 {
				t.Fatalf("%q occurs %d times in the manifests, want once", m.old, n)
			}
			_, err := check(strings.Replace(stream, m.old, m.new, 1))
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), m.want) {
				t.Errorf("got %v, want an error containing %q", err, m.want)
			}
		})
	}
}
