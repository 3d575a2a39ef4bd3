// Package kubernetes holds modelgate's plain Kubernetes manifests (the
// YAML files of this folder, embedded as Files) and Check, the
// cross-checks they and the Helm chart's renderings must pass: the
// modelgate config in the ConfigMap parses, and the Deployment, Services,
// PodDisruptionBudget and NetworkPolicy agree with it (ports, probes,
// shutdown grace, secrets, storage). Drift between the gateway and a
// manifest fails Check.
package kubernetes

import (
	"embed"
	"errors"
	"fmt"
	"net"
	"path"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"modelgate/cmd/modelgate/wiring"
	"modelgate/deploy"
	"modelgate/envoy"
	"modelgate/extproc/config"
)

// Files are the plain manifests, one or more objects per .yaml file.
//
//go:embed *.yaml
var Files embed.FS

// NonRootUID is the uid and gid of the distroless "nonroot" user the
// image runs as (the Dockerfile's base image and USER).
const NonRootUID = 65532

// Port names of the modelgate container, as the contract fixes them.
const (
	GRPCPortName  = "grpc"
	AdminPortName = "admin"
)

// Paths of the admin listener's health endpoints.
const (
	ReadyPath  = "/readyz"
	HealthPath = "/healthz"
)

// Probe is one probe of the modelgate container, its port resolved.
type Probe struct {
	// Kind is "http" (httpGet) or "grpc".
	Kind string
	// Path is the httpGet path; Service the gRPC health service name.
	Path, Service string
	Port          int32
}

func (p Probe) String() string {
	if p.Kind == "grpc" {
		return fmt.Sprintf("grpc :%d service %q", p.Port, p.Service)
	}
	return fmt.Sprintf("%s %s :%d", p.Kind, p.Path, p.Port)
}

// Service is one Service in front of the ext_proc port.
type Service struct {
	Name     string
	Headless bool
	// Port is the Service port, TargetPort the container port it
	// resolves to.
	Port, TargetPort int32
}

// Summary is what Check found: the key fields the plain manifests and a
// chart rendering are compared on.
type Summary struct {
	// Kinds lists "Kind/name" of every object, sorted.
	Kinds     []string
	Namespace string
	// Config is the parsed modelgate config of the ConfigMap.
	Config *config.Config
	// ConfigPath is where the container reads it.
	ConfigPath string
	Image      string
	Replicas   int32
	// Selector is the Deployment's pod selector.
	Selector map[string]string
	// GRPCPort and AdminPort are the ports of the config's listeners,
	// equal to the container ports of the same names.
	GRPCPort, AdminPort          int32
	Readiness, Liveness, Startup Probe
	ShutdownGrace, PreStopSleep  time.Duration
	TerminationGrace             time.Duration
	// Services are the Services selecting the pods, by name.
	Services []Service
	// ExtProcService is the Service envoy.ext_proc_address names.
	ExtProcService string
	// SecretEnv maps each environment variable set from a Secret to
	// "secret/key", with " (optional)" when it may be missing.
	SecretEnv map[string]string
	// SQLiteVolume is the emptyDir mount holding the SQLite database, or
	// "" with PostgreSQL.
	SQLiteVolume string
	// AdmittedPorts are the container ports the NetworkPolicy admits
	// traffic to, sorted; AdminPeers is how many peers reach the admin
	// port (0 keeps it private).
	AdmittedPorts []int32
	AdminPeers    int
	// MaxUnavailable is the PodDisruptionBudget's.
	MaxUnavailable string
	// Resources are the container's requests and limits.
	Resources corev1.ResourceRequirements
}

// checker gathers every problem, so that one run reports them all.
type checker struct{ errs []error }

func (c *checker) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// Check cross-checks decoded manifests: one Deployment of modelgate, its
// ConfigMap, Services, PodDisruptionBudget and NetworkPolicy. It returns
// the summary and every problem found.
func Check(objs []deploy.Object) (*Summary, error) {
	c := &checker{}
	s := &Summary{SecretEnv: map[string]string{}}
	for _, o := range objs {
		s.Kinds = append(s.Kinds, o.Kind+"/"+o.Name)
		if o.Kind == "Secret" {
			c.errorf("Secret/%s: secrets are created with kubectl, never committed or rendered", o.Name)
		}
	}
	sort.Strings(s.Kinds)

	deps := deploy.Find[*appsv1.Deployment](objs)
	if len(deps) != 1 {
		return s, fmt.Errorf("want one Deployment, got %d in %s", len(deps), deploy.KindNames(objs))
	}
	d := deps[0]
	s.Namespace = d.Namespace
	for _, o := range objs {
		switch {
		case o.Kind == "Namespace" && o.Name != s.Namespace:
			c.errorf("Namespace/%s: the objects are in %q", o.Name, s.Namespace)
		case o.Kind != "Namespace" && o.Namespace != s.Namespace:
			c.errorf("%s/%s: namespace %q, the Deployment's is %q", o.Kind, o.Name, o.Namespace, s.Namespace)
		}
	}
	s.Replicas = 1
	if d.Spec.Replicas != nil {
		s.Replicas = *d.Spec.Replicas
	}
	pod := d.Spec.Template
	if d.Spec.Selector == nil || len(d.Spec.Selector.MatchLabels) == 0 || len(d.Spec.Selector.MatchExpressions) > 0 {
		return s, errors.New("deployment: spec.selector must be matchLabels only")
	}
	s.Selector = d.Spec.Selector.MatchLabels
	if !selects(s.Selector, pod.Labels) {
		c.errorf("Deployment: selector %v does not match the pod labels %v", s.Selector, pod.Labels)
	}
	if len(pod.Spec.Containers) != 1 {
		return s, fmt.Errorf("deployment: want one container, got %d", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	s.Image = ctr.Image
	s.Resources = ctr.Resources

	cfg := c.config(objs, pod.Spec, ctr, s)
	if cfg == nil {
		return s, errors.Join(c.errs...)
	}
	s.Config = cfg
	c.ports(cfg, ctr, s)
	c.probes(ctr, s)
	c.shutdown(cfg, pod.Spec, ctr, s)
	c.security(pod.Spec, ctr)
	c.env(cfg, ctr, s)
	c.storage(cfg, pod.Spec, ctr, s)
	c.services(objs, cfg, pod.Labels, ctr, s)
	c.disruption(objs, pod.Labels, s)
	c.networkPolicy(objs, pod.Labels, ctr, s)
	if len(ctr.Resources.Requests) == 0 || ctr.Resources.Limits.Memory().IsZero() {
		c.errorf("container: set resources.requests and a memory limit")
	}
	return s, errors.Join(c.errs...)
}

// config finds the config file the container is started with, in the
// ConfigMap mounted where --config points, and parses it.
func (c *checker) config(objs []deploy.Object, pod corev1.PodSpec, ctr corev1.Container, s *Summary) *config.Config {
	args := append(slices.Clone(ctr.Command), ctr.Args...)
	if len(args) < 3 || args[0] != "serve" || args[1] != "--config" {
		c.errorf("container: args %q, want serve --config FILE", args)
		return nil
	}
	s.ConfigPath = args[2]
	dir, file := path.Split(s.ConfigPath)
	var cmName string
	for _, m := range ctr.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
				if !m.ReadOnly {
					c.errorf("container: mount %s of ConfigMap/%s should be readOnly", m.MountPath, cmName)
				}
			}
		}
	}
	if cmName == "" {
		c.errorf("container: no ConfigMap volume mounted at %s (from --config %s)", dir, s.ConfigPath)
		return nil
	}
	for _, cm := range deploy.Find[*corev1.ConfigMap](objs) {
		if cm.Name != cmName {
			continue
		}
		data, ok := cm.Data[file]
		if !ok {
			c.errorf("ConfigMap/%s: no key %q (--config %s)", cmName, file, s.ConfigPath)
			return nil
		}
		cfg, err := config.Parse([]byte(data))
		if err != nil {
			c.errorf("ConfigMap/%s %s: %w", cmName, file, err)
			return nil
		}
		return cfg
	}
	c.errorf("the Deployment mounts ConfigMap/%s, which is not among the manifests", cmName)
	return nil
}

// listenPort returns the port of a listen address, whose host must reach
// the pod IP (not a loopback address).
func (c *checker) listenPort(key, addr string) int32 {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.errorf("config %s %q: %v", key, addr, err)
		return 0
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		c.errorf("config %s %q: listen on 0.0.0.0 (or [::]) in a pod: probes and Services reach the pod IP", key, addr)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		c.errorf("config %s %q: bad port", key, addr)
	}
	return int32(p)
}

func (c *checker) ports(cfg *config.Config, ctr corev1.Container, s *Summary) {
	s.GRPCPort = c.listenPort("server.grpc_listen", cfg.Server.GRPCListen)
	s.AdminPort = c.listenPort("server.admin_listen", cfg.Server.AdminListen)
	want := map[string]int32{GRPCPortName: s.GRPCPort, AdminPortName: s.AdminPort}
	got := map[string]int32{}
	for _, p := range ctr.Ports {
		got[p.Name] = p.ContainerPort
		if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
			c.errorf("container port %s: protocol %s, want TCP", p.Name, p.Protocol)
		}
	}
	if !reflect.DeepEqual(got, want) {
		c.errorf("container ports %v, want %v (server.grpc_listen, server.admin_listen)", got, want)
	}
}

// resolve turns a port number or container port name into a number.
func resolve(ctr corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range ctr.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func (c *checker) probe(name string, ctr corev1.Container, p *corev1.Probe) Probe {
	switch {
	case p == nil:
		return Probe{}
	case p.HTTPGet != nil:
		if p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP {
			c.errorf("%s: the admin listener speaks plain HTTP, not %s", name, p.HTTPGet.Scheme)
		}
		return Probe{Kind: "http", Path: p.HTTPGet.Path, Port: resolve(ctr, p.HTTPGet.Port)}
	case p.GRPC != nil:
		out := Probe{Kind: "grpc", Port: p.GRPC.Port}
		if p.GRPC.Service != nil {
			out.Service = *p.GRPC.Service
		}
		return out
	}
	c.errorf("%s: want httpGet or grpc", name)
	return Probe{}
}

// probes: readiness is /readyz on the admin port or the gRPC health
// service "" on the grpc port; liveness (and startup) /healthz on admin.
func (c *checker) probes(ctr corev1.Container, s *Summary) {
	s.Readiness = c.probe("readinessProbe", ctr, ctr.ReadinessProbe)
	s.Liveness = c.probe("livenessProbe", ctr, ctr.LivenessProbe)
	s.Startup = c.probe("startupProbe", ctr, ctr.StartupProbe)
	ready := []Probe{{Kind: "http", Path: ReadyPath, Port: s.AdminPort}, {Kind: "grpc", Port: s.GRPCPort}}
	if !slices.Contains(ready, s.Readiness) {
		c.errorf("readinessProbe %v, want one of %v", s.Readiness, ready)
	}
	live := Probe{Kind: "http", Path: HealthPath, Port: s.AdminPort}
	if s.Liveness != live {
		c.errorf("livenessProbe %v, want %v", s.Liveness, live)
	}
	if ctr.StartupProbe != nil && s.Startup != live {
		c.errorf("startupProbe %v, want %v", s.Startup, live)
	}
}

// shutdown: the kubelet waits terminationGracePeriodSeconds from the
// start of preStop; the sleep and then the server's drain must fit.
func (c *checker) shutdown(cfg *config.Config, pod corev1.PodSpec, ctr corev1.Container, s *Summary) {
	s.ShutdownGrace = cfg.Server.ShutdownGrace.Duration
	if ctr.Lifecycle == nil || ctr.Lifecycle.PreStop == nil || ctr.Lifecycle.PreStop.Sleep == nil {
		// The distroless image has no shell and no sleep binary.
		c.errorf("container: want lifecycle.preStop.sleep, so that endpoints drop the pod before SIGTERM")
	} else {
		s.PreStopSleep = time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second
		if s.PreStopSleep <= 0 {
			c.errorf("preStop sleep must be positive")
		}
	}
	if pod.TerminationGracePeriodSeconds == nil {
		c.errorf("pod: set terminationGracePeriodSeconds (the default 30s cuts streams)")
		return
	}
	s.TerminationGrace = time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if s.TerminationGrace < s.PreStopSleep+s.ShutdownGrace+config.ShutdownOverhead {
		c.errorf("terminationGracePeriodSeconds %v must cover preStop sleep %v + server.shutdown_grace %v + serve's overhead %v",
			s.TerminationGrace, s.PreStopSleep, s.ShutdownGrace, config.ShutdownOverhead)
	}
	// A non-streamed answer arrives whole, up to response_headers after
	// the request: a shorter grace cuts it on every rollout.
	for _, m := range cfg.Models {
		for _, d := range m.Deployments {
			for _, b := range cfg.Backends {
				if rh := m.Timeouts.Or(b.Timeouts).ResponseHeaders.Duration; b.Name == d.Backend && s.ShutdownGrace < rh {
					c.errorf("server.shutdown_grace %v is shorter than model %s's timeouts.response_headers %v on backend %s: a rollout would cut its non-streamed answers",
						s.ShutdownGrace, m.ID, rh, b.Name)
				}
			}
		}
	}
}

func (c *checker) security(pod corev1.PodSpec, ctr corev1.Container) {
	psc := pod.SecurityContext
	if psc == nil {
		c.errorf("pod: no securityContext")
		return
	}
	nonRoot := int64(NonRootUID)
	if !isTrue(psc.RunAsNonRoot) || !eq(psc.RunAsUser, nonRoot) || !eq(psc.RunAsGroup, nonRoot) {
		c.errorf("pod securityContext: want runAsNonRoot, runAsUser and runAsGroup %d", NonRootUID)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		c.errorf("pod securityContext: want seccompProfile RuntimeDefault")
	}
	if isTrue(pod.AutomountServiceAccountToken) || pod.AutomountServiceAccountToken == nil {
		c.errorf("pod: automountServiceAccountToken false: modelgate does not call the API server")
	}
	sc := ctr.SecurityContext
	if sc == nil || !isTrue(sc.ReadOnlyRootFilesystem) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		isTrue(sc.Privileged) || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		len(sc.Capabilities.Add) > 0 {
		c.errorf("container securityContext: want readOnlyRootFilesystem, no privilege escalation, capabilities drop [ALL]")
	}
	if sc != nil && (sc.RunAsUser != nil && *sc.RunAsUser != nonRoot || sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot) {
		c.errorf("container securityContext: overrides the non-root user")
	}
}

func isTrue(b *bool) bool             { return b != nil && *b }
func eq[T comparable](p *T, v T) bool { return p != nil && *p == v }

// configEnv lists the environment variables the config names: required
// ones (the process fails or a backend has no credential without them)
// and the admin token's, which may be missing (the admin API stays off).
func configEnv(cfg *config.Config) (required []string, optional []string) {
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(required, n) {
				required = append(required, n)
			}
		}
	}
	add(cfg.Storage.PostgresURLEnv, cfg.Images.URLKeyEnv)
	if cfg.RateLimits.Store == "redis" {
		add(cfg.RateLimits.RedisURLEnv)
	}
	for _, b := range cfg.Backends {
		add(b.APIKeyEnv, b.ServiceAccountEnv)
	}
	return required, []string{cfg.Admin.TokenEnv}
}

// env: every variable the config names comes from a Secret.
func (c *checker) env(cfg *config.Config, ctr corev1.Container, s *Summary) {
	set := map[string]corev1.EnvVar{}
	for _, e := range ctr.Env {
		if _, dup := set[e.Name]; dup {
			c.errorf("container env %s: set twice", e.Name)
		}
		set[e.Name] = e
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			r := e.ValueFrom.SecretKeyRef
			s.SecretEnv[e.Name] = r.Name + "/" + r.Key
			if isTrue(r.Optional) {
				s.SecretEnv[e.Name] += " (optional)"
			}
		}
	}
	if len(ctr.EnvFrom) > 0 {
		c.errorf("container: envFrom hides which variables are set; name each one")
	}
	required, optional := configEnv(cfg)
	for _, n := range append(required, optional...) {
		e, ok := set[n]
		switch {
		case !ok && slices.Contains(optional, n):
		case !ok:
			c.errorf("container env: the config names %s, which is not set", n)
		case e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil:
			c.errorf("container env %s: take it from a Secret (secretKeyRef), not a literal value", n)
		case isTrue(e.ValueFrom.SecretKeyRef.Optional) && slices.Contains(required, n):
			c.errorf("container env %s: required by the config, so its secretKeyRef must not be optional", n)
		}
	}
}

// storage: SQLite needs one writable emptyDir holding the database (the
// root filesystem is read-only) and a single replica; PostgreSQL needs no
// volume.
func (c *checker) storage(cfg *config.Config, pod corev1.PodSpec, ctr corev1.Container, s *Summary) {
	emptyDirs := map[string]bool{}
	for _, v := range pod.Volumes {
		if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
	}
	var mounts []string
	for _, m := range ctr.VolumeMounts {
		if emptyDirs[m.Name] {
			mounts = append(mounts, m.MountPath)
		}
	}
	if cfg.Storage.PostgresURLEnv != "" {
		if len(emptyDirs) > 0 {
			c.errorf("pod: emptyDir volumes %v with PostgreSQL storage; a read-only pod needs none", mounts)
		}
		return
	}
	db := cfg.Storage.SQLitePath
	if !path.IsAbs(db) {
		c.errorf("storage.sqlite_path %q: make it absolute, under the data volume", db)
	}
	for _, m := range mounts {
		if strings.HasPrefix(db, path.Clean(m)+"/") {
			s.SQLiteVolume = m
		}
	}
	if s.SQLiteVolume == "" || len(mounts) != 1 {
		c.errorf("storage.sqlite_path %s: want it in the one writable emptyDir mount, got mounts %v", db, mounts)
	}
	if pod.SecurityContext == nil || !eq(pod.SecurityContext.FSGroup, int64(NonRootUID)) {
		c.errorf("pod securityContext: fsGroup %d makes the SQLite volume writable", NonRootUID)
	}
	if s.Replicas > 1 {
		c.errorf("replicas %d with SQLite: each pod would have its own keys and usage; use PostgreSQL", s.Replicas)
	}
}

// services: each Service selecting the pods exposes only the grpc port;
// envoy.ext_proc_address names one of them, and the Envoy bootstrap
// generated from the config resolves it by DNS.
func (c *checker) services(objs []deploy.Object, cfg *config.Config, podLabels map[string]string, ctr corev1.Container, s *Summary) {
	byName := map[string]Service{}
	for _, svc := range deploy.Find[*corev1.Service](objs) {
		if !selects(svc.Spec.Selector, podLabels) {
			c.errorf("Service/%s: selector %v does not select the pods %v", svc.Name, svc.Spec.Selector, podLabels)
			continue
		}
		if len(svc.Spec.Ports) != 1 {
			c.errorf("Service/%s: want only the grpc port, got %d ports", svc.Name, len(svc.Spec.Ports))
			continue
		}
		p := svc.Spec.Ports[0]
		out := Service{Name: svc.Name, Headless: svc.Spec.ClusterIP == corev1.ClusterIPNone, Port: p.Port, TargetPort: resolve(ctr, p.TargetPort)}
		if out.TargetPort != s.GRPCPort {
			c.errorf("Service/%s: targetPort %s is container port %d, server.grpc_listen's is %d", svc.Name, p.TargetPort.String(), out.TargetPort, s.GRPCPort)
		}
		// Istio and Envoy Gateway pick HTTP/2 from appProtocol or the name.
		if p.Name != GRPCPortName || p.AppProtocol == nil || *p.AppProtocol != "grpc" {
			c.errorf("Service/%s: name the port %q with appProtocol grpc", svc.Name, GRPCPortName)
		}
		if t := svc.Spec.Type; t != "" && t != corev1.ServiceTypeClusterIP {
			c.errorf("Service/%s: type %s exposes ext_proc outside the cluster", svc.Name, t)
		}
		byName[svc.Name] = out
		s.Services = append(s.Services, out)
	}
	if len(s.Services) == 0 {
		c.errorf("no Service selects the pods")
	}
	sort.Slice(s.Services, func(i, j int) bool { return s.Services[i].Name < s.Services[j].Name })

	addr := cfg.Envoy.ExtProcAddress
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		c.errorf("envoy.ext_proc_address %q: %v", addr, err)
		return
	}
	// <service>.<namespace>.svc[.<cluster domain>]: Envoy runs in another
	// namespace.
	parts := strings.SplitN(host, ".", 4)
	if len(parts) < 3 || parts[1] != s.Namespace || parts[2] != "svc" {
		c.errorf("envoy.ext_proc_address %q: want <service>.%s.svc.<cluster domain>", addr, s.Namespace)
		return
	}
	svc, ok := byName[parts[0]]
	if !ok {
		c.errorf("envoy.ext_proc_address %q: no Service %q selects the pods", addr, parts[0])
		return
	}
	s.ExtProcService = svc.Name
	if port != strconv.Itoa(int(svc.Port)) {
		c.errorf("envoy.ext_proc_address %q: Service/%s listens on %d", addr, svc.Name, svc.Port)
	}
	c.bootstrap(cfg, host, svc)
}

// bootstrap generates the self-managed Envoy's bootstrap from the config
// and checks its ext_proc cluster: STRICT_DNS on the Service's name, so
// that a headless Service spreads streams over every ready pod.
func (c *checker) bootstrap(cfg *config.Config, host string, svc Service) {
	b, err := envoy.Bootstrap(wiring.EnvoyConfig(cfg))
	if err == nil {
		err = envoy.Validate(b)
	}
	if err != nil {
		c.errorf("Envoy bootstrap of the config: %v", err)
		return
	}
	for _, cl := range b.GetStaticResources().GetClusters() {
		if cl.GetName() != envoy.ExtProcCluster {
			continue
		}
		sa := cl.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if cl.GetType() != clusterv3.Cluster_STRICT_DNS || sa.GetAddress() != host || sa.GetPortValue() != uint32(svc.Port) {
			c.errorf("Envoy cluster %s: %s %s:%d, want STRICT_DNS %s:%d", cl.GetName(), cl.GetType(), sa.GetAddress(), sa.GetPortValue(), host, svc.Port)
		}
		return
	}
	c.errorf("Envoy bootstrap: no cluster %s", envoy.ExtProcCluster)
}

func (c *checker) disruption(objs []deploy.Object, podLabels map[string]string, s *Summary) {
	pdbs := deploy.Find[*policyv1.PodDisruptionBudget](objs)
	if len(pdbs) != 1 {
		c.errorf("want one PodDisruptionBudget, got %d", len(pdbs))
		return
	}
	p := pdbs[0]
	if p.Spec.Selector == nil || !selects(p.Spec.Selector.MatchLabels, podLabels) || len(p.Spec.Selector.MatchExpressions) > 0 {
		c.errorf("PodDisruptionBudget/%s: selector does not select the pods", p.Name)
	}
	// minAvailable would block every drain of a single replica.
	if p.Spec.MaxUnavailable == nil || p.Spec.MinAvailable != nil {
		c.errorf("PodDisruptionBudget/%s: set maxUnavailable, not minAvailable", p.Name)
		return
	}
	s.MaxUnavailable = p.Spec.MaxUnavailable.String()
	if p.Spec.MaxUnavailable.Type == intstr.Int && p.Spec.MaxUnavailable.IntVal < 1 {
		c.errorf("PodDisruptionBudget/%s: maxUnavailable %d blocks node drains", p.Name, p.Spec.MaxUnavailable.IntVal)
	}
}

// networkPolicy: ingress to the pods only on the grpc port from named
// peers (Envoy); the admin port only from peers named for it.
func (c *checker) networkPolicy(objs []deploy.Object, podLabels map[string]string, ctr corev1.Container, s *Summary) {
	nps := deploy.Find[*networkingv1.NetworkPolicy](objs)
	if len(nps) != 1 {
		c.errorf("want one NetworkPolicy, got %d", len(nps))
		return
	}
	np := nps[0]
	if len(np.Spec.PodSelector.MatchExpressions) > 0 || !selects(np.Spec.PodSelector.MatchLabels, podLabels) {
		c.errorf("NetworkPolicy/%s: podSelector does not select the pods", np.Name)
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		c.errorf("NetworkPolicy/%s: policyTypes lacks Ingress", np.Name)
	}
	if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) && len(np.Spec.Egress) == 0 {
		c.errorf("NetworkPolicy/%s: Egress without rules denies DNS, the store and the providers", np.Name)
	}
	admitted := map[int32]bool{}
	for i, r := range np.Spec.Ingress {
		if len(r.From) == 0 {
			c.errorf("NetworkPolicy/%s ingress[%d]: no from admits every source", np.Name, i)
		}
		if len(r.Ports) == 0 {
			c.errorf("NetworkPolicy/%s ingress[%d]: no ports admits every port", np.Name, i)
		}
		for _, p := range r.Ports {
			if p.Port == nil || p.EndPort != nil || p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
				c.errorf("NetworkPolicy/%s ingress[%d]: want single TCP ports", np.Name, i)
				continue
			}
			n := resolve(ctr, *p.Port)
			switch n {
			case s.GRPCPort:
			case s.AdminPort:
				s.AdminPeers += len(r.From)
			default:
				c.errorf("NetworkPolicy/%s ingress[%d]: port %s is neither grpc (%d) nor admin (%d)", np.Name, i, p.Port.String(), s.GRPCPort, s.AdminPort)
			}
			admitted[n] = true
		}
	}
	for p := range admitted {
		s.AdmittedPorts = append(s.AdmittedPorts, p)
	}
	slices.Sort(s.AdmittedPorts)
	if !admitted[s.GRPCPort] {
		c.errorf("NetworkPolicy/%s: the grpc port %d is not admitted: Envoy cannot reach ext_proc", np.Name, s.GRPCPort)
	}
}

// selects reports whether a non-empty label selector matches labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
