// Package compose_test checks docker-compose.yml, the Dockerfile and the
// configs in deploy/compose against each other and against the gateway,
// without Docker: ports, service names, healthchecks, the image's user and
// the ownership of its /data, and the Envoy image pin.
package compose_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"sigs.k8s.io/yaml"

	"modelgate/envoy"
	"modelgate/extproc/config"
)

// root is the repository, where docker-compose.yml and the Dockerfile are;
// the compose file's relative paths start there.
const root = "../.."

// composeFile is the part of the Compose format docker-compose.yml uses.
// It is decoded strictly: a key it does not name (a typo, or a feature the
// tests do not check yet) fails the test.
type composeFile struct {
	Services map[string]service   `json:"services"`
	Volumes  map[string]*struct{} `json:"volumes"`
}

type service struct {
	Profiles    []string             `json:"profiles"`
	Image       string               `json:"image"`
	Build       string               `json:"build"`
	Entrypoint  []string             `json:"entrypoint"`
	Command     []string             `json:"command"`
	Environment map[string]string    `json:"environment"`
	Volumes     []string             `json:"volumes"`
	Ports       []string             `json:"ports"`
	Healthcheck *healthcheck         `json:"healthcheck"`
	DependsOn   map[string]dependsOn `json:"depends_on"`
	Deploy      *struct {
		Replicas int `json:"replicas"`
	} `json:"deploy"`
	StopGracePeriod string `json:"stop_grace_period"`
	Restart         string `json:"restart"`
}

type healthcheck struct {
	Test        []string `json:"test"`
	Interval    string   `json:"interval"`
	Timeout     string   `json:"timeout"`
	Retries     int      `json:"retries"`
	StartPeriod string   `json:"start_period"`
}

type dependsOn struct {
	Condition string `json:"condition"`
}

func parseCompose(data []byte) (*composeFile, error) {
	var cf composeFile
	if err := yaml.UnmarshalStrict(data, &cf); err != nil {
		return nil, err
	}
	if len(cf.Services) == 0 {
		return nil, fmt.Errorf("no services")
	}
	return &cf, nil
}

func loadCompose(t *testing.T) *composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := parseCompose(data)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return cf
}

// interpolate resolves Compose's ${NAME:-default}, ${NAME-default},
// ${NAME} and $$ as `docker compose up` does in a shell that sets none of
// the variables.
func interpolate(s string) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			return b.String() + s, nil
		}
		b.WriteString(s[:i])
		s = s[i+1:]
		switch {
		case strings.HasPrefix(s, "$"):
			b.WriteByte('$')
			s = s[1:]
		case strings.HasPrefix(s, "{"):
			end := strings.IndexByte(s, '}')
			if end < 0 {
				return "", fmt.Errorf("unclosed ${ in %q", s)
			}
			expr := s[1:end]
			s = s[end+1:]
			if _, def, ok := strings.Cut(expr, ":-"); ok {
				b.WriteString(def)
			} else if _, def, ok := strings.Cut(expr, "-"); ok {
				b.WriteString(def)
			} else if strings.ContainsAny(expr, ":?+") {
				return "", fmt.Errorf("${%s}: only ${NAME}, ${NAME:-default} and ${NAME-default} are resolved here", expr)
			}
		default:
			return "", fmt.Errorf("bare $ before %q: write $$ or ${NAME}", s)
		}
	}
}

// env is a service's environment as the container gets it.
func env(t *testing.T, svc service) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range svc.Environment {
		r, err := interpolate(v)
		if err != nil {
			t.Fatalf("environment %s: %v", k, err)
		}
		out[k] = r
	}
	return out
}

// mount is one short-syntax volume: SOURCE:TARGET[:ro].
type mount struct{ Source, Target string }

func mounts(t *testing.T, svc service) []mount {
	t.Helper()
	var out []mount
	for _, v := range svc.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "ro" {
			t.Fatalf("volume %q: want SOURCE:TARGET or SOURCE:TARGET:ro", v)
		}
		out = append(out, mount{parts[0], parts[1]})
	}
	return out
}

// mountedFile returns the repository path of the file bind-mounted at
// target, failing when none is.
func mountedFile(t *testing.T, svc service, target string) string {
	t.Helper()
	for _, m := range mounts(t, svc) {
		if m.Target == target {
			if !strings.HasPrefix(m.Source, "./") {
				t.Fatalf("%s is mounted from %q, not a file of the repository", target, m.Source)
			}
			return filepath.Join(root, filepath.FromSlash(m.Source))
		}
	}
	t.Fatalf("nothing is mounted at %s (volumes %q)", target, svc.Volumes)
	return ""
}

// published is one short-syntax port: [IP:][HOST:]CONTAINER.
type published struct{ IP, Host, Container string }

func ports(t *testing.T, svc service) []published {
	t.Helper()
	var out []published
	for _, p := range svc.Ports {
		parts := strings.Split(p, ":")
		var pp published
		switch len(parts) {
		case 1:
			pp = published{Container: parts[0]}
		case 2:
			pp = published{Host: parts[0], Container: parts[1]}
		case 3:
			pp = published{IP: parts[0], Host: parts[1], Container: parts[2]}
		default:
			t.Fatalf("port %q: want [IP:][HOST:]CONTAINER", p)
		}
		if _, err := strconv.ParseUint(pp.Container, 10, 16); err != nil {
			t.Fatalf("port %q: container port %q is not a number", p, pp.Container)
		}
		out = append(out, pp)
	}
	return out
}

// flagValue returns the argument after name in args.
func flagValue(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// portOf returns the port of a host:port address.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return port
}

// gateway is a service that runs `modelgate serve`, with its config.
type gateway struct {
	name string
	svc  service
	path string // the config file in the repository
	cfg  *config.Config
}

func gateways(t *testing.T, cf *composeFile) []gateway {
	t.Helper()
	var out []gateway
	for _, name := range sortedKeys(cf.Services) {
		svc := cf.Services[name]
		if len(svc.Command) == 0 || svc.Command[0] != "serve" || svc.Entrypoint != nil {
			continue
		}
		target, ok := flagValue(svc.Command, "--config")
		if !ok {
			t.Fatalf("service %s: serve without --config", name)
		}
		p := mountedFile(t, svc, target)
		out = append(out, gateway{name: name, svc: svc, path: p, cfg: parseConfig(t, p)})
	}
	if len(out) == 0 {
		t.Fatal("no service runs `modelgate serve`")
	}
	return out
}

func parseConfig(t *testing.T, path string) *config.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cfg
}

// proxy is a service that runs Envoy, with its bootstrap.
type proxy struct {
	name string
	svc  service
	path string
	b    *bootstrapv3.Bootstrap
}

func proxies(t *testing.T, cf *composeFile) []proxy {
	t.Helper()
	var out []proxy
	for _, name := range sortedKeys(cf.Services) {
		svc := cf.Services[name]
		if !strings.HasPrefix(svc.Image, "envoyproxy/envoy") {
			continue
		}
		target, ok := flagValue(svc.Command, "-c")
		if !ok || svc.Command[0] != "envoy" {
			t.Fatalf("service %s: command %q, want envoy -c BOOTSTRAP ...", name, svc.Command)
		}
		p := mountedFile(t, svc, target)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := envoy.LoadYAML(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, proxy{name: name, svc: svc, path: p, b: b})
	}
	if len(out) == 0 {
		t.Fatal("no service runs Envoy")
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestComposeFileIsStrict(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parseCompose(data); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	// A misspelt key is refused rather than ignored.
	bad := strings.Replace(string(data), "depends_on:", "depend_on:", 1)
	if _, err := parseCompose([]byte(bad)); err == nil || !strings.Contains(err.Error(), "depend_on") {
		t.Errorf("a misspelt depends_on: error %v, want it named", err)
	}
	for _, s := range []string{"${A:-x}", "$$", "${A}", "${A-y}"} {
		if _, err := interpolate(s); err != nil {
			t.Errorf("interpolate(%q): %v", s, err)
		}
	}
	if got, _ := interpolate("a${A:-b}c$$d${B}"); got != "abc$d" {
		t.Errorf("interpolate = %q, want abc$d", got)
	}
	for _, s := range []string{"$A", "${A:?required}", "${A"} {
		if _, err := interpolate(s); err == nil {
			t.Errorf("interpolate(%q) succeeded; want an error", s)
		}
	}
}

// Every service restarts unless stopped and has a healthcheck that what
// depends on it waits for; a service without a profile, which plain
// `docker compose up` starts, depends only on others without one.
func TestServicesStartInOrder(t *testing.T) {
	t.Parallel()
	cf := loadCompose(t)
	// The mock provider serves only the recorded API: nothing to probe
	// without a key, and Envoy needs it only once a request comes.
	noHealthcheck := map[string]bool{"mockprovider": true}
	for _, name := range sortedKeys(cf.Services) {
		svc := cf.Services[name]
		if svc.Restart != "unless-stopped" {
			t.Errorf("service %s: restart %q, want unless-stopped", name, svc.Restart)
		}
		if (svc.Healthcheck == nil) != noHealthcheck[name] {
			t.Errorf("service %s: healthcheck %v; only %v go without", name, svc.Healthcheck, sortedKeys(noHealthcheck))
		}
		if h := svc.Healthcheck; h != nil {
			if len(h.Test) < 2 || h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL" || h.Interval == "" || h.Timeout == "" || h.Retries == 0 {
				t.Errorf("service %s: healthcheck %+v, want a CMD test, interval, timeout and retries", name, *h)
			}
		}
		for dep, d := range svc.DependsOn {
			target, ok := cf.Services[dep]
			switch {
			case !ok:
				t.Errorf("service %s depends on %s, which is not a service", name, dep)
			case target.Healthcheck != nil && d.Condition != "service_healthy":
				t.Errorf("service %s depends on %s with %q, want service_healthy", name, dep, d.Condition)
			case target.Healthcheck == nil && d.Condition != "service_started":
				t.Errorf("service %s depends on %s (no healthcheck) with %q, want service_started", name, dep, d.Condition)
			case len(svc.Profiles) == 0 && len(target.Profiles) > 0:
				t.Errorf("service %s starts without a profile but depends on %s of profiles %v", name, dep, target.Profiles)
			}
		}
		for _, m := range mounts(t, svc) {
			if strings.HasPrefix(m.Source, "./") {
				if _, err := os.Stat(filepath.Join(root, m.Source)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, m.Source, err)
				}
			} else if _, ok := cf.Volumes[m.Source]; !ok {
				t.Errorf("service %s mounts volume %s, which the file does not declare", name, m.Source)
			}
		}
	}
	if shared := cf.Services["modelgate-shared"]; !slices.Equal(shared.Profiles, []string{"shared"}) {
		t.Errorf("modelgate-shared profiles %v, want [shared]", shared.Profiles)
	}
}

// Only Envoy's client listeners are published beyond the host's loopback:
// admin ports (the modelgate dashboard, /metrics) are bound to 127.0.0.1.
func TestOnlyEnvoyListensBeyondLoopback(t *testing.T) {
	t.Parallel()
	cf := loadCompose(t)
	public := map[string]string{} // service: the container port it may publish widely
	for _, p := range proxies(t, cf) {
		ls := p.b.GetStaticResources().GetListeners()
		if len(ls) != 1 {
			t.Fatalf("%s: %d listeners, want 1", p.path, len(ls))
		}
		public[p.name] = strconv.Itoa(int(ls[0].GetAddress().GetSocketAddress().GetPortValue()))
	}
	for _, name := range sortedKeys(cf.Services) {
		for _, pp := range ports(t, cf.Services[name]) {
			if pp.Container != public[name] && pp.IP != "127.0.0.1" {
				t.Errorf("service %s publishes container port %s on %q; bind it to 127.0.0.1", name, pp.Container, pp.IP)
			}
		}
	}
	for _, g := range gateways(t, cf) {
		admin := portOf(t, g.cfg.Server.AdminListen)
		if !slices.ContainsFunc(ports(t, g.svc), func(pp published) bool { return pp.Container == admin && pp.IP == "127.0.0.1" }) {
			t.Errorf("service %s: the admin port %s (%s) is not published on 127.0.0.1: %q", g.name, admin, g.path, g.svc.Ports)
		}
	}
}

// Each gateway service agrees with its config: it listens on every
// interface of its container, its healthcheck asks its admin port's
// /readyz, its store is the image's /data volume (SQLite) or a PostgreSQL
// service it waits for, and every variable the config names is set.
func TestGatewaysAgreeWithTheirConfigs(t *testing.T) {
	t.Parallel()
	cf := loadCompose(t)
	img := readDockerfile(t)
	for _, g := range gateways(t, cf) {
		t.Run(g.name, func(t *testing.T) {
			e := env(t, g.svc)
			for what, addr := range map[string]string{"server.grpc_listen": g.cfg.Server.GRPCListen, "server.admin_listen": g.cfg.Server.AdminListen} {
				if host, _, _ := net.SplitHostPort(addr); host != "0.0.0.0" && host != "" && host != "::" {
					t.Errorf("%s: %s %s is not reachable from other containers; listen on 0.0.0.0", g.path, what, addr)
				}
			}
			want := []string{"CMD", img.Binaries["healthcheck"], "http://127.0.0.1:" + portOf(t, g.cfg.Server.AdminListen) + "/readyz"}
			if g.svc.Healthcheck == nil || !slices.Equal(g.svc.Healthcheck.Test, want) {
				t.Errorf("healthcheck %v, want test %q", g.svc.Healthcheck, want)
			}
			// Docker kills after stop_grace_period; serve needs its
			// shutdown_grace and then its bounded overhead (the usage
			// ledger's flush among it).
			if stop, err := time.ParseDuration(g.svc.StopGracePeriod); err != nil || stop < g.cfg.Server.ShutdownGrace.Duration+config.ShutdownOverhead {
				t.Errorf("stop_grace_period %q is shorter than %s's server.shutdown_grace %v + %v: Docker would kill serve while it drains",
					g.svc.StopGracePeriod, g.path, g.cfg.Server.ShutdownGrace, config.ShutdownOverhead)
			}
			replicas := 1
			if g.svc.Deploy != nil {
				replicas = g.svc.Deploy.Replicas
			}
			if v := g.cfg.Storage.PostgresURLEnv; v != "" {
				needService(t, cf, g, "storage.postgres_url_env", v, e[v], "postgres")
			} else {
				dir := path.Dir(g.cfg.Storage.SQLitePath)
				if !path.IsAbs(g.cfg.Storage.SQLitePath) || dir != img.DataDir {
					t.Errorf("%s: storage.sqlite_path %s is not in the image's %s", g.path, g.cfg.Storage.SQLitePath, img.DataDir)
				}
				if !slices.ContainsFunc(mounts(t, g.svc), func(m mount) bool {
					_, named := cf.Volumes[m.Source]
					return m.Target == dir && named
				}) {
					t.Errorf("%s is not a named volume (%q): the database would not outlive the container", dir, g.svc.Volumes)
				}
				if replicas != 1 {
					t.Errorf("%d replicas of one SQLite file: SQLite is one gateway's store", replicas)
				}
			}
			if g.cfg.RateLimits.Store == "redis" {
				v := g.cfg.RateLimits.RedisURLEnv
				needService(t, cf, g, "rate_limits.redis_url_env", v, e[v], "redis")
			}
			for _, b := range g.cfg.Backends {
				if b.APIKeyEnv != "" && e[b.APIKeyEnv] == "" {
					t.Errorf("backend %s: %s is not set (serve refuses to start without it)", b.Name, b.APIKeyEnv)
				}
				backendService(t, cf, b.BaseURL)
			}
		})
	}
}

// needService checks that the URL in variable v (named by the config key
// what) points at a compose service the gateway waits for.
func needService(t *testing.T, cf *composeFile, g gateway, what, v, value, scheme string) {
	t.Helper()
	u, err := url.Parse(value)
	if err != nil || value == "" {
		t.Errorf("%s: %s names %s, which the service sets to %q", g.path, what, v, value)
		return
	}
	if !strings.HasPrefix(u.Scheme, scheme) {
		t.Errorf("%s = %s://..., want %s", v, u.Scheme, scheme)
	}
	dep, ok := cf.Services[u.Hostname()]
	if !ok {
		t.Errorf("%s points at host %s, which is not a service", v, u.Hostname())
		return
	}
	if g.svc.DependsOn[u.Hostname()].Condition != "service_healthy" || dep.Healthcheck == nil {
		t.Errorf("service %s does not wait for %s to be healthy", g.name, u.Hostname())
	}
	if !slices.Equal(dep.Profiles, g.svc.Profiles) {
		t.Errorf("service %s has profiles %v and %s %v: they start apart", g.name, g.svc.Profiles, u.Hostname(), dep.Profiles)
	}
}

// backendService checks that a backend URL whose host is a compose service
// reaches the port that service listens on.
func backendService(t *testing.T, cf *composeFile, baseURL string) {
	t.Helper()
	u, err := url.Parse(baseURL)
	if err != nil {
		t.Fatal(err)
	}
	svc, ok := cf.Services[u.Hostname()]
	if !ok {
		return // a provider on the internet
	}
	listen, ok := flagValue(svc.Command, "--listen")
	if !ok {
		t.Errorf("%s: service %s has no --listen to check the port against", baseURL, u.Hostname())
		return
	}
	host, port, _ := net.SplitHostPort(listen)
	if port != u.Port() || host != "0.0.0.0" {
		t.Errorf("%s: service %s listens on %s", baseURL, u.Hostname(), listen)
	}
}

// Each Envoy service runs a bootstrap whose ext_proc cluster is a gateway
// service at its gRPC port and whose listener is the published port; it
// waits for that gateway, and its healthcheck asks the admin listener's
// /ready. Its image is pinned by version and digest.
func TestEnvoysAgreeWithBootstraps(t *testing.T) {
	t.Parallel()
	cf := loadCompose(t)
	gws := map[string]gateway{}
	for _, g := range gateways(t, cf) {
		gws[g.name] = g
	}
	pin := regexp.MustCompile(`^envoyproxy/envoy:v1\.37\.\d+@sha256:[0-9a-f]{64}$`)
	image := ""
	for _, p := range proxies(t, cf) {
		t.Run(p.name, func(t *testing.T) {
			if !pin.MatchString(p.svc.Image) {
				t.Errorf("image %s, want envoyproxy/envoy:v1.37.x@sha256:...", p.svc.Image)
			}
			if image != "" && p.svc.Image != image {
				t.Errorf("image %s; another Envoy runs %s", p.svc.Image, image)
			}
			image = p.svc.Image
			sr := p.b.GetStaticResources()
			listen := sr.GetListeners()[0].GetAddress().GetSocketAddress()
			lport := strconv.Itoa(int(listen.GetPortValue()))
			if !slices.ContainsFunc(ports(t, p.svc), func(pp published) bool { return pp.Container == lport }) {
				t.Errorf("the listener's port %s is not published (%q)", lport, p.svc.Ports)
			}
			found := false
			for _, c := range sr.GetClusters() {
				for _, le := range c.GetLoadAssignment().GetEndpoints() {
					for _, lb := range le.GetLbEndpoints() {
						sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
						host, port := sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))
						if c.GetName() != envoy.ExtProcCluster {
							if _, ok := cf.Services[host]; ok && p.svc.DependsOn[host].Condition == "" {
								t.Errorf("cluster %s reaches service %s, which Envoy does not depend on", c.GetName(), host)
							}
							continue
						}
						found = true
						g, ok := gws[host]
						if !ok {
							t.Errorf("%s: the ext_proc cluster reaches %s, which is not a service running modelgate serve", p.path, host)
							continue
						}
						if want := portOf(t, g.cfg.Server.GRPCListen); port != want {
							t.Errorf("%s: the ext_proc cluster reaches %s:%s; %s serves gRPC on %s (%s)", p.path, host, port, host, want, g.path)
						}
						if p.svc.DependsOn[host].Condition != "service_healthy" {
							t.Errorf("Envoy does not wait for %s to be healthy", host)
						}
						// The bootstrap is generated from that config.
						if g.cfg.Envoy.ExtProcAddress != net.JoinHostPort(host, port) || portOf(t, g.cfg.Envoy.Listen) != lport {
							t.Errorf("%s was not generated from %s (ext_proc %s, listen %s)", p.path, g.path, g.cfg.Envoy.ExtProcAddress, g.cfg.Envoy.Listen)
						}
					}
				}
			}
			if !found {
				t.Errorf("%s has no %s cluster", p.path, envoy.ExtProcCluster)
			}
			checkEnvoyHealthcheck(t, p)
		})
	}
}

// envoyProbe matches the bash healthcheck's connection and request.
var envoyProbe = regexp.MustCompile(`/dev/tcp/([0-9.]+)/(\d+)\b[\s\S]*'GET (/\S*) HTTP/1\.1`)

func checkEnvoyHealthcheck(t *testing.T, p proxy) {
	t.Helper()
	h := p.svc.Healthcheck
	if h == nil || len(h.Test) != 4 || !slices.Equal(h.Test[:3], []string{"CMD", "bash", "-c"}) {
		t.Errorf("healthcheck %v, want CMD bash -c SCRIPT", h)
		return
	}
	m := envoyProbe.FindStringSubmatch(h.Test[3])
	if m == nil {
		t.Errorf("healthcheck script %q asks no /dev/tcp/HOST/PORT", h.Test[3])
		return
	}
	if m[3] != "/ready" {
		t.Errorf("healthcheck asks %s, want /ready", m[3])
	}
	admin := p.b.GetAdmin().GetAddress().GetSocketAddress()
	if admin == nil {
		t.Errorf("%s has no admin listener; the healthcheck asks %s:%s", p.path, m[1], m[2])
		return
	}
	if got := net.JoinHostPort(admin.GetAddress(), strconv.Itoa(int(admin.GetPortValue()))); got != net.JoinHostPort(m[1], m[2]) || m[1] != "127.0.0.1" {
		t.Errorf("%s: the admin listener is %s; the healthcheck asks %s:%s (want both on 127.0.0.1)", p.path, got, m[1], m[2])
	}
}

// Every YAML file in deploy/compose is a modelgate config that config.Parse
// accepts or an Envoy bootstrap that envoy.LoadYAML accepts, and the
// compose file runs each of them.
func TestConfigsParse(t *testing.T) {
	t.Parallel()
	cf := loadCompose(t)
	used := map[string]bool{}
	for _, g := range gateways(t, cf) {
		used[filepath.Clean(g.path)] = true
	}
	for _, p := range proxies(t, cf) {
		used[filepath.Clean(p.path)] = true
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no YAML in deploy/compose: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var top map[string]any
		if err := yaml.Unmarshal(data, &top); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if top["static_resources"] != nil {
			if _, err := envoy.LoadYAML(data); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		} else if _, err := config.Parse(data); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if !used[filepath.Clean(filepath.Join(root, "deploy", "compose", f))] {
			t.Errorf("%s: no service of docker-compose.yml runs it", f)
		}
	}
}

// The shared profile's config serves what the default one does: only the
// stores and the ext_proc address differ.
func TestSharedConfigFollowsDefault(t *testing.T) {
	t.Parallel()
	def := parseConfig(t, "modelgate.yaml")
	shared := parseConfig(t, "modelgate-shared.yaml")
	if shared.Storage.PostgresURLEnv == "" || shared.RateLimits.Store != "redis" {
		t.Errorf("modelgate-shared.yaml: storage %+v, rate_limits.store %q; want PostgreSQL and Redis", shared.Storage, shared.RateLimits.Store)
	}
	shared.Storage, shared.RateLimits, shared.Envoy.ExtProcAddress = def.Storage, def.RateLimits, def.Envoy.ExtProcAddress
	if d := diff(def, shared); d != "" {
		t.Errorf("modelgate-shared.yaml differs from modelgate.yaml beyond storage, rate_limits and envoy.ext_proc_address (-default +shared):\n%s", d)
	}
}
