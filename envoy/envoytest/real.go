package envoytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"modelgate/envoy"
)

// Bounds of a real Envoy's life in a test. They bound waits that end as
// soon as Envoy is done, so a slow machine only takes longer.
const (
	readyTimeout = 30 * time.Second // from exec to /ready answering 200
	stopTimeout  = 10 * time.Second // from SIGTERM to exit, then SIGKILL
	// flushInterval is how often Envoy writes its access log out
	// (--file-flush-interval-msec, 10s by default): an entry is there
	// this long after its request ended.
	flushInterval = 10 * time.Millisecond
)

// stderrTail is how much of Envoy's stderr (and of its stdout without
// an access log reader) a failure shows.
const stderrTail = 16 << 10

// baseIDs makes each Envoy's --base-id unique within the process; the
// process id makes it unique on the machine.
var baseIDs atomic.Uint32

// startReal runs bin on b and waits until it is ready.
//
// Ports: the listener and the admin interface get port 0, so the kernel
// picks free ones at bind time. Envoy writes the admin address it bound
// to the --admin-address-path file, and its admin /listeners?format=json
// reports the port each listener bound (the ListenerStatus local_address,
// documented to carry the port the OS allocated for port 0). Picking
// ports beforehand by listening on port 0 and closing would leave a
// window in which another test, or another package's test binary running
// at the same time, takes the port.
func startReal(t testing.TB, bin string, b *bootstrapv3.Bootstrap, s settings) Front {
	t.Helper()
	b = proto.Clone(b).(*bootstrapv3.Bootstrap)
	format, err := prepare(b)
	if err != nil {
		t.Fatalf("preparing the bootstrap for a real Envoy: %v", err)
	}
	if s.accessLog != nil && format == nil {
		t.Fatal("the bootstrap has no JSON access log on stdout or stderr to read entries from: generate it with envoy.AccessLogStdout")
	}
	y, err := envoy.MarshalYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfgPath, adminPath := filepath.Join(dir, "envoy.yaml"), filepath.Join(dir, "admin-address")
	if err := os.WriteFile(cfgPath, y, 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &tail{max: stderrTail}
	stdout := &lines{tail: tail{max: stderrTail}}
	if s.accessLog != nil {
		stdout.line = func(line []byte) error {
			e, err := ParseAccessLogLine(format, line)
			if err != nil {
				return err
			}
			s.accessLog(e)
			return nil
		}
	}
	cmd := exec.Command(bin, args(cfgPath, adminPath)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = stopTimeout // should Envoy leave a child holding its pipes
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Envoy (%s=%s): %v", EnvVar, bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stop(cmd, exited)
		if t.Failed() {
			t.Logf("Envoy's stderr ends with:\n%s\nits stdout, but for the access log entries taken, ends with:\n%s", stderr, &stdout.tail)
		}
	})
	admin, err := waitReady(adminPath, exited)
	if err != nil {
		if isClosed(exited) {
			err = fmt.Errorf("%w (it exited: %v)", err, waitErr)
		}
		t.Fatalf("Envoy (%s) did not get ready: %v; its stderr ends with:\n%s", bin, err, stderr)
	}
	url, err := listenerURL(admin, b.GetStaticResources().GetListeners()[0].GetName())
	if err != nil {
		t.Fatalf("Envoy (%s): %v; its stderr ends with:\n%s", bin, err, stderr)
	}
	return front{url: url, real: true}
}

// args are Envoy's command line: one worker thread, no hot restart (so no
// shared memory to collide on; the unique --base-id would keep them apart
// anyway), warnings and errors only on stderr, and the access log written
// out every flushInterval instead of every 10s.
func args(cfgPath, adminPath string) []string {
	baseID := uint32(os.Getpid()%40_000_000)*100 + baseIDs.Add(1)%100
	return []string{
		"-c", cfgPath,
		"--log-level", "warn",
		"--base-id", strconv.FormatUint(uint64(baseID), 10),
		"--concurrency", "1",
		"--disable-hot-restart",
		"--admin-address-path", adminPath,
		"--file-flush-interval-msec", strconv.FormatInt(flushInterval.Milliseconds(), 10),
	}
}

// prepare puts b's admin interface and listeners on 127.0.0.1, port 0, and
// a stderr access log on stdout, where nothing but the access log goes
// (Envoy logs to stderr). It returns the access log's JSON format, nil
// without one.
func prepare(b *bootstrapv3.Bootstrap) (map[string]string, error) {
	loopback := func() *corev3.Address {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}}
	}
	if b.Admin == nil {
		b.Admin = &bootstrapv3.Admin{}
	}
	b.Admin.Address = loopback()
	listeners := b.GetStaticResources().GetListeners()
	if len(listeners) == 0 {
		return nil, errors.New("no static listener")
	}
	for _, l := range listeners {
		l.Address = loopback()
		for _, f := range connectionManagers(l) {
			for _, al := range f.hcm.GetAccessLog() {
				stderr := &streamv3.StderrAccessLog{}
				if al.GetTypedConfig() == nil || al.GetTypedConfig().UnmarshalTo(stderr) != nil {
					continue
				}
				a, err := anypb.New(&streamv3.StdoutAccessLog{
					AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: stderr.GetLogFormat()}})
				if err != nil {
					return nil, err
				}
				al.Name, al.ConfigType = "envoy.access_loggers.stdout", &accesslogv3.AccessLog_TypedConfig{TypedConfig: a}
			}
			a, err := anypb.New(f.hcm)
			if err != nil {
				return nil, err
			}
			f.filter.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
		}
	}
	return AccessLogFormat(b), nil
}

// AccessLogFormat is the JSON format of b's first stdout or stderr access
// log, as ParseAccessLogLine takes it (field name to value); nil if it has
// none.
func AccessLogFormat(b *bootstrapv3.Bootstrap) map[string]string {
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, f := range connectionManagers(l) {
			for _, al := range f.hcm.GetAccessLog() {
				stdout, stderr := &streamv3.StdoutAccessLog{}, &streamv3.StderrAccessLog{}
				var lf *corev3.SubstitutionFormatString
				switch tc := al.GetTypedConfig(); {
				case tc != nil && tc.UnmarshalTo(stdout) == nil:
					lf = stdout.GetLogFormat()
				case tc != nil && tc.UnmarshalTo(stderr) == nil:
					lf = stderr.GetLogFormat()
				default:
					continue
				}
				if lf.GetJsonFormat() == nil {
					return nil
				}
				format := map[string]string{}
				for k, v := range lf.GetJsonFormat().GetFields() {
					if s, ok := v.GetKind().(*structpb.Value_StringValue); ok {
						format[k] = s.StringValue
					}
				}
				return format
			}
		}
	}
	return nil
}

// hcmFilter is a listener's HTTP connection manager, unpacked.
type hcmFilter struct {
	filter *listenerv3.Filter
	hcm    *hcmv3.HttpConnectionManager
}

func connectionManagers(l *listenerv3.Listener) []hcmFilter {
	var out []hcmFilter
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			hcm := &hcmv3.HttpConnectionManager{}
			if f.GetTypedConfig() != nil && f.GetTypedConfig().UnmarshalTo(hcm) == nil {
				out = append(out, hcmFilter{f, hcm})
			}
		}
	}
	return out
}

// waitReady waits for the admin address file and then for /ready to
// answer 200, and returns the admin address.
func waitReady(adminPath string, exited <-chan struct{}) (string, error) {
	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: time.Second}
	var admin, last string
	for {
		if admin == "" {
			// Envoy creates the file, then writes host:port.
			if data, err := os.ReadFile(adminPath); err == nil {
				if _, _, err := net.SplitHostPort(strings.TrimSpace(string(data))); err == nil {
					admin = strings.TrimSpace(string(data))
				}
			}
		}
		if admin != "" {
			resp, err := client.Get("http://" + admin + "/ready")
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return admin, nil
				}
				last = fmt.Sprintf("admin /ready answered %d %s", resp.StatusCode, bytes.TrimSpace(body))
			} else {
				last = err.Error()
			}
		} else {
			last = "no admin address in " + adminPath + " yet"
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not ready after %v: %s", readyTimeout, last)
		}
		select {
		case <-exited:
			return "", fmt.Errorf("it exited before it was ready (%s)", last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// listenerURL asks the admin interface which port the listener bound.
func listenerURL(admin, name string) (string, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + admin + "/listeners?format=json")
	if err != nil {
		return "", fmt.Errorf("asking the admin interface for the listeners: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("admin /listeners: %d %s (%v)", resp.StatusCode, body, err)
	}
	var ls adminv3.Listeners
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &ls); err != nil {
		return "", fmt.Errorf("admin /listeners: %w: %s", err, body)
	}
	for _, l := range ls.GetListenerStatuses() {
		sa := l.GetLocalAddress().GetSocketAddress()
		if l.GetName() == name && sa.GetPortValue() != 0 {
			return "http://" + net.JoinHostPort(sa.GetAddress(), strconv.Itoa(int(sa.GetPortValue()))), nil
		}
	}
	return "", fmt.Errorf("admin /listeners has no bound listener %q: %s", name, body)
}

// stop ends Envoy: SIGTERM, then SIGKILL after stopTimeout.
func stop(cmd *exec.Cmd, exited <-chan struct{}) {
	if isClosed(exited) {
		return
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil { // Windows has no SIGTERM
		cmd.Process.Kill() //nolint:errcheck // it may have exited meanwhile
	}
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		cmd.Process.Kill() //nolint:errcheck // it may have exited meanwhile
		<-exited
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return "(nothing)"
	}
	return string(w.buf)
}

// lines hands each complete line written to it to line, if set; what it
// cannot parse, and everything without line, goes to the tail.
type lines struct {
	tail
	line    func([]byte) error
	partial []byte // written by one goroutine: exec's copy of the pipe
}

func (w *lines) Write(p []byte) (int, error) {
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		l := w.partial[:i+1]
		if w.line == nil || len(bytes.TrimSpace(l)) == 0 {
			w.tail.Write(l) //nolint:errcheck // never fails
		} else if err := w.line(l[:i]); err != nil {
			fmt.Fprintf(&w.tail, "%s  (not an access log entry: %v)\n", l, err)
		}
		w.partial = w.partial[i+1:]
	}
	return len(p), nil
}
