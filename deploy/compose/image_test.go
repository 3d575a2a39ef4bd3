package compose_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"modelgate/envoy"
	"modelgate/extproc/config"
)

var update = flag.Bool("update", false, "rewrite the Envoy bootstraps in deploy/compose from their modelgate configs")

func diff(want, got any) string { return cmp.Diff(want, got) }

// image is what the Dockerfile's final stage makes of the image.
type image struct {
	UID, GID int
	// DataDir is the directory copied in owned by UID:GID.
	DataDir string
	// Binaries maps a binary's name to its path in the image, Packages
	// to the package the build stage builds it from.
	Binaries, Packages map[string]string
	Entrypoint         string
}

var (
	userLine  = regexp.MustCompile(`(?m)^USER\s+(\S+)\s*$`)
	copyLine  = regexp.MustCompile(`(?m)^COPY\s+(.+)$`)
	buildLine = regexp.MustCompile(`go build [^&]*-o /out/(\S+) (\./\S+)`)
	entryLine = regexp.MustCompile(`(?m)^ENTRYPOINT \["([^"]+)"`)
	fromLine  = regexp.MustCompile(`(?m)^FROM `)
)

// parseDockerfile reads the image's user, its /data and its binaries,
// and lists what is wrong with them.
func parseDockerfile(text string) (image, []string) {
	text = strings.ReplaceAll(text, "\\\n", " ")
	img := image{Binaries: map[string]string{}, Packages: map[string]string{}}
	var problems []string
	for _, m := range buildLine.FindAllStringSubmatch(text, -1) {
		img.Packages[m[1]] = m[2]
	}
	froms := fromLine.FindAllStringIndex(text, -1)
	if len(froms) == 0 {
		return img, []string{"no FROM"}
	}
	final := text[froms[len(froms)-1][0]:]
	users := userLine.FindAllStringSubmatch(final, -1)
	if len(users) != 1 {
		return img, []string{fmt.Sprintf("the final stage has %d USER lines, want 1", len(users))}
	}
	if _, err := fmt.Sscanf(users[0][1], "%d:%d", &img.UID, &img.GID); err != nil || users[0][1] != fmt.Sprintf("%d:%d", img.UID, img.GID) {
		problems = append(problems, fmt.Sprintf("USER %s: want numeric UID:GID", users[0][1]))
	}
	if img.UID == 0 {
		problems = append(problems, "the image runs as root")
	}
	for _, m := range copyLine.FindAllStringSubmatch(final, -1) {
		args := strings.Fields(m[1])
		var chown string
		var srcs []string
		for _, a := range args {
			switch {
			case strings.HasPrefix(a, "--chown="):
				chown = strings.TrimPrefix(a, "--chown=")
			case strings.HasPrefix(a, "--"):
			default:
				srcs = append(srcs, a)
			}
		}
		dest := srcs[len(srcs)-1]
		srcs = srcs[:len(srcs)-1]
		if strings.HasSuffix(dest, "/") {
			for _, s := range srcs {
				img.Binaries[path.Base(s)] = dest + path.Base(s)
			}
			continue
		}
		if chown != "" {
			if chown != users[0][1] {
				problems = append(problems, fmt.Sprintf("COPY --chown=%s to %s, but the image runs as %s", chown, dest, users[0][1]))
			}
			img.DataDir = dest
		}
	}
	if img.DataDir == "" {
		problems = append(problems, "the final stage copies in no directory owned by the image's user (COPY --from=build --chown=UID:GID ... /data)")
	}
	if m := entryLine.FindStringSubmatch(final); m != nil {
		img.Entrypoint = m[1]
	}
	for _, b := range []string{"modelgate", "healthcheck"} {
		if img.Binaries[b] == "" || img.Packages[b] == "" {
			problems = append(problems, fmt.Sprintf("%s is not built and copied into the image", b))
		}
	}
	if img.Entrypoint != img.Binaries["modelgate"] {
		problems = append(problems, fmt.Sprintf("ENTRYPOINT %s is not modelgate", img.Entrypoint))
	}
	return img, problems
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	img, problems := parseDockerfile(string(data))
	if len(problems) > 0 {
		t.Fatalf("Dockerfile:\n%s", strings.Join(problems, "\n"))
	}
	return img
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	img := readDockerfile(t)
	if img.DataDir != "/data" || img.UID != 65532 || img.GID != 65532 {
		t.Errorf("Dockerfile: %s owned by %d:%d; the manifests expect /data and distroless's nonroot 65532:65532", img.DataDir, img.UID, img.GID)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// The old bug: /data left to root. And a user by name.
	for what, mutated := range map[string]string{
		"no chown":     strings.Replace(string(data), "--chown=65532:65532 ", "", 1),
		"other owner":  strings.Replace(string(data), "--chown=65532:65532 ", "--chown=0:0 ", 1),
		"user by name": strings.Replace(string(data), "USER 65532:65532", "USER nonroot", 1),
	} {
		if mutated == string(data) {
			t.Fatalf("%s: the Dockerfile no longer has the text this check changes", what)
		}
		if _, problems := parseDockerfile(mutated); len(problems) == 0 {
			t.Errorf("%s: parseDockerfile found no problem", what)
		}
	}
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds the image's modelgate and healthcheck as the Dockerfile
// does (static, from the packages it names) into a directory any user can
// read, and returns their paths by name.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds modelgate")
	}
	img := readDockerfile(t)
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "modelgate-compose-"); buildErr != nil {
			return
		}
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		for _, name := range []string{"modelgate", "healthcheck"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), img.Packages[name])
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", img.Packages[name], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return map[string]string{
		img.Binaries["modelgate"]:   filepath.Join(binDir, "modelgate"),
		img.Binaries["healthcheck"]: filepath.Join(binDir, "healthcheck"),
	}
}

// Each Envoy bootstrap is what `modelgate envoy-config` makes of the config
// of the gateway it calls. With -update, those in deploy/compose are
// rewritten (envoy/envoy.yaml is cmd/modelgate's TestEnvoyYAMLIsGenerated's).
func TestBootstrapsAreGenerated(t *testing.T) {
	bins := binaries(t)
	img := readDockerfile(t)
	cf := loadCompose(t)
	gws := map[string]gateway{}
	for _, g := range gateways(t, cf) {
		gws[g.name] = g
	}
	for _, p := range proxies(t, cf) {
		host, _, err := net.SplitHostPort(gwOf(t, p))
		if err != nil {
			t.Fatal(err)
		}
		g, ok := gws[host]
		if !ok {
			t.Fatalf("%s calls %s, which runs no gateway", p.name, host)
		}
		out, err := exec.Command(bins[img.Binaries["modelgate"]], "envoy-config", "--config", g.path).Output()
		if err != nil {
			t.Fatalf("modelgate envoy-config --config %s: %v", g.path, err)
		}
		ours := filepath.Dir(p.path) == filepath.Join(root, "deploy", "compose")
		if *update && ours {
			if err := os.WriteFile(p.path, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		have, err := os.ReadFile(p.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, out) {
			fix := "go test ./cmd/modelgate -run TestEnvoyYAMLIsGenerated -update"
			if ours {
				fix = "go test ./deploy/compose -run TestBootstrapsAreGenerated -update"
			}
			t.Errorf("%s is not what modelgate envoy-config makes of %s: run %s", p.path, g.path, fix)
		}
	}
}

// gwOf returns the address of a bootstrap's ext_proc cluster.
func gwOf(t *testing.T, p proxy) string {
	t.Helper()
	for _, c := range p.b.GetStaticResources().GetClusters() {
		if c.GetName() == envoy.ExtProcCluster {
			sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
			return net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue())))
		}
	}
	t.Fatalf("%s: no ext_proc cluster", p.path)
	return ""
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// openDir is a temporary directory other users may enter.
func openDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // t.TempDir makes both 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// container is `modelgate serve` run as the image's user would be in its
// container: the compose service's command and environment, a copy of its
// config with the SQLite file in dataDir and loopback listeners.
type container struct {
	cmd           *exec.Cmd
	stderr        *lockedBuffer
	exited        chan struct{}
	admin, sqlite string
	uid, gid      int
}

func startGateway(t *testing.T, g gateway, img image, dataDir string) *container {
	t.Helper()
	bins := binaries(t)
	var doc map[string]any
	data, err := os.ReadFile(g.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	c := &container{admin: freeAddr(t), sqlite: filepath.Join(dataDir, path.Base(g.cfg.Storage.SQLitePath)), uid: img.UID, gid: img.GID}
	server, _ := doc["server"].(map[string]any)
	storage, _ := doc["storage"].(map[string]any)
	if server == nil || storage == nil {
		t.Fatalf("%s has no server or storage section to point at the test's ports and directory", g.path)
	}
	server["grpc_listen"], server["admin_listen"], storage["sqlite_path"] = freeAddr(t), c.admin, c.sqlite
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(out); err != nil {
		t.Fatalf("the copy of %s: %v", g.path, err)
	}
	cfgPath := filepath.Join(filepath.Dir(dataDir), "modelgate.yaml")
	if err := os.WriteFile(cfgPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string(nil), g.svc.Command...)
	args[1+indexOf(args, "--config")] = cfgPath
	c.cmd = exec.Command(bins[img.Entrypoint], args...)
	for k, v := range env(t, g.svc) {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.stderr = &lockedBuffer{}
	c.cmd.Stdout, c.cmd.Stderr = c.stderr, c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(img.UID), Gid: uint32(img.GID)}}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.exited = make(chan struct{})
	go func() { c.cmd.Wait(); close(c.exited) }() //nolint:errcheck // read from ProcessState
	t.Cleanup(func() {
		select {
		case <-c.exited:
		default:
			c.cmd.Process.Kill() //nolint:errcheck // the test failed already
			<-c.exited
		}
	})
	return c
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("runs modelgate as the image's uid:gid, which needs root: run go test as root (CI does)")
	}
}

func sqliteGateways(t *testing.T) []gateway {
	t.Helper()
	var out []gateway
	for _, g := range gateways(t, loadCompose(t)) {
		if g.cfg.Storage.PostgresURLEnv == "" {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		t.Fatal("no gateway service stores in SQLite")
	}
	return out
}

// THE test of `docker compose up`: the image's user, with the image's /data
// (a directory of its own, owner-only), runs the compose command, becomes
// ready, creates its database there and stops cleanly on SIGTERM.
func TestServeAsTheImageUser(t *testing.T) {
	needRoot(t)
	img := readDockerfile(t)
	for _, g := range sqliteGateways(t) {
		t.Run(g.name, func(t *testing.T) {
			data := filepath.Join(openDir(t), "data")
			if err := os.Mkdir(data, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(data, img.UID, img.GID); err != nil {
				t.Fatal(err)
			}
			c := startGateway(t, g, img, data)
			readyz := c.waitReady(t)
			st, err := os.Stat(c.sqlite)
			if err != nil {
				t.Fatalf("ready, but the database is not in %s: %v\n%s", data, err, c.stderr)
			}
			if s := st.Sys().(*syscall.Stat_t); int(s.Uid) != img.UID || int(s.Gid) != img.GID {
				t.Errorf("%s belongs to %d:%d, want the image's %d:%d", c.sqlite, s.Uid, s.Gid, img.UID, img.GID)
			}
			// Docker's probe: the service's healthcheck, as the same user.
			status, out := c.healthcheck(t, g.svc.Healthcheck.Test)
			switch {
			case readyz && status != 0:
				t.Errorf("the compose healthcheck failed (%d) on a ready gateway:\n%s", status, out)
			case !readyz:
				t.Logf("serve has no /readyz yet: the compose healthcheck would say %q", out)
			}
			if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve did not stop within 30s of SIGTERM:\n%s", c.stderr)
			}
			if code := c.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("serve exited with %d after SIGTERM, want 0:\n%s", code, c.stderr)
			}
		})
	}
}

// The bug this guards against: /data owned by root, as a volume Docker
// creates from an image without its own /data. serve must fail at once,
// naming the file, instead of hanging or serving without a store.
func TestServeRefusesADataDirItCannotWrite(t *testing.T) {
	needRoot(t)
	img := readDockerfile(t)
	for _, g := range sqliteGateways(t) {
		t.Run(g.name, func(t *testing.T) {
			data := filepath.Join(openDir(t), "data")
			if err := os.Mkdir(data, 0o755); err != nil { // root's, as the old volume was
				t.Fatal(err)
			}
			c := startGateway(t, g, img, data)
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve neither failed nor stopped within 30s with a root-owned %s:\n%s", data, c.stderr)
			}
			if c.cmd.ProcessState.ExitCode() == 0 {
				t.Errorf("serve exited 0 with a root-owned %s", data)
			}
			if msg := c.stderr.String(); !strings.Contains(msg, c.sqlite) || !strings.Contains(msg, "is not writable by uid") {
				t.Errorf("serve's error does not name %s and say why it cannot open it:\n%s", c.sqlite, msg)
			}
			t.Logf("serve with a root-owned %s: %s", data, strings.TrimSpace(c.stderr.String()))
			if _, err := os.Stat(c.sqlite); err == nil {
				t.Errorf("%s was created in a directory the user cannot write", c.sqlite)
			}
		})
	}
}

// waitReady polls the admin listener until /readyz answers 200, or, while
// serve has no /readyz, /healthz does; it reports whether /readyz exists.
func (c *container) waitReady(t *testing.T) bool {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-c.exited:
			t.Fatalf("serve exited (%v) before it was ready:\n%s", c.cmd.ProcessState, c.stderr)
		default:
		}
		if resp, err := client.Get("http://" + c.admin + "/readyz"); err == nil {
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				return true
			case http.StatusNotFound:
				if resp, err := client.Get("http://" + c.admin + "/healthz"); err == nil {
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						return false
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("serve was not ready within 30s:\n%s", c.stderr)
	return false
}

// healthcheck runs a compose CMD healthcheck of the gateway as the image's
// user, pointed at the test's admin address.
func (c *container) healthcheck(t *testing.T, test []string) (int, string) {
	t.Helper()
	bins := binaries(t)
	if len(test) < 2 || test[0] != "CMD" || bins[test[1]] == "" {
		t.Fatalf("healthcheck %q does not run a binary of the image", test)
	}
	args := append([]string(nil), test[2:]...)
	for i, a := range args {
		if u, err := url.Parse(a); err == nil && u.Scheme == "http" {
			u.Host = c.admin
			args[i] = u.String()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins[test[1]], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}}
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}
