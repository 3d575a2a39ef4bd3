package standin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"modelgate/envoy"
)

// Entry is what an access log line would show of one request.
type Entry struct {
	Method, Path string
	Status       int
	// Details is %RESPONSE_CODE_DETAILS% for local replies and resets.
	Details string
	// Flags is %RESPONSE_FLAGS% without its "-" placeholder: the short
	// names of the response flags set, comma-separated in Envoy's order,
	// or empty. The stand-in sets UT, UF, UC, UH, UO, UPE, URX, NR and SI.
	Flags string
	// Route and Cluster are the final route and cluster, if any.
	Route, Cluster string
	// UpstreamHost is %UPSTREAM_HOST%: the address of the last attempt's
	// host; Attempts is %UPSTREAM_REQUEST_ATTEMPT_COUNT%.
	UpstreamHost string
	Attempts     int
	// Metadata is the dynamic metadata written by the ext_proc server into
	// receiving namespaces, as %DYNAMIC_METADATA(ns:key)% would see it.
	Metadata map[string]map[string]any
	// StartTime and Duration are %START_TIME% and %DURATION%: from the
	// request's arrival to its end.
	StartTime time.Time
	Duration  time.Duration
	// BytesReceived and BytesSent count body bytes from and to the client.
	BytesReceived, BytesSent int64
	// ClientAddress is %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%: the
	// client's IP address as the connection manager trusts it
	// (use_remote_address, xff_num_trusted_hops).
	ClientAddress string
	// Line is what the bootstrap's access log writes for the request, a
	// JSON object without its newline; empty without an access log.
	Line string
}

// Option adjusts the stand-in for tests.
type Option func(*Proxy)

// WithResponseSplitter cuts every upstream body read into the chunks that
// are sent to the processor in STREAMED mode, so tests can split SSE
// mid-event and mid-character.
func WithResponseSplitter(split func([]byte) [][]byte) Option {
	return func(p *Proxy) { p.split = split }
}

// WithDataOnFinalChunk makes the last STREAMED chunk carry data, as over
// HTTP/2, instead of Envoy's separate empty end_of_stream chunk (HTTP/1).
func WithDataOnFinalChunk() Option { return func(p *Proxy) { p.dataOnFinal = true } }

// WithAccessLog receives an Entry when each request ends, instead of the
// bootstrap's access log output: the line it would write is Entry.Line.
// Without it, the line goes to the process's stdout or stderr, as Envoy's.
func WithAccessLog(log func(Entry)) Option { return func(p *Proxy) { p.accessLog = log } }

// WithClusterTLS replaces a cluster's TLS settings, for every host (for
// test CAs); hosts with auto_host_sni keep their hostname as SNI.
func WithClusterTLS(cluster string, cfg *tls.Config) Option {
	return func(p *Proxy) { p.tlsOverride[cluster] = cfg }
}

// Proxy is the stand-in: an http.Handler that processes each request as
// Envoy with the bootstrap would.
type Proxy struct {
	plan        *plan
	conn        *grpc.ClientConn            // to the router-level ext_proc filter's cluster
	conns       map[string]*grpc.ClientConn // to every ext_proc cluster, by name
	clock       Clock
	random      func() uint64
	backOff     func(time.Duration) time.Duration
	marker      string // the debug-string marker of message-valued attributes
	split       func([]byte) [][]byte
	dataOnFinal bool
	accessLog   func(Entry)
	tlsOverride map[string]*tls.Config
	ids         requestIDs
	version     envoy.Version // the Envoy release whose behaviour it has (WithEnvoyVersion)
	resolve     Resolver
	optErr      error // an option New refuses
}

// New validates the bootstrap and returns a stand-in. It neither blocks nor
// connects: the gRPC connection is made at the first request.
func New(b *bootstrapv3.Bootstrap, opts ...Option) (*Proxy, error) {
	pl, err := compile(b)
	if err != nil {
		return nil, err
	}
	p := &Proxy{plan: pl, conns: map[string]*grpc.ClientConn{}, tlsOverride: map[string]*tls.Config{},
		clock: realClock{}, random: defaultRandom, version: referenceVersion, resolve: net.DefaultResolver.LookupIPAddr}
	for _, o := range opts {
		o(p)
	}
	if p.optErr != nil {
		return nil, p.optErr
	}
	p.marker = debugMarkers[p.random()%uint64(len(debugMarkers))]
	now := p.clock.Now()
	extProcClusters := map[string]bool{}
	if pl.extproc != nil {
		extProcClusters[pl.extproc.cluster] = true
	}
	for _, c := range pl.clusters {
		if c.upstream != nil {
			extProcClusters[c.upstream.cluster] = true
		}
	}
	for name, c := range pl.clusters {
		if c.strictDNS && !extProcClusters[name] {
			p.expandStrictDNS(c, c.family)
		}
	}
	for name, c := range pl.clusters {
		if cfg, ok := p.tlsOverride[name]; ok {
			c.tls = cfg
			for _, h := range c.lb.hosts {
				h.tls = cfg
			}
		}
		c.lb.clock, c.lb.random = p.clock, p.random
		if c.lb.od != nil {
			c.lb.od.random, c.lb.od.nextSweep = p.random, now.Add(c.lb.od.cfg.interval)
		}
		for _, h := range c.lb.hosts {
			h.transport = transport(h)
		}
	}
	fcs := []*filterConfig{pl.extproc}
	for _, c := range pl.clusters {
		fcs = append(fcs, c.upstream)
	}
	for _, fc := range fcs {
		if fc == nil || p.conns[fc.cluster] != nil {
			continue
		}
		addr := pl.clusters[fc.cluster].addr
		conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("standin: ext_proc cluster: %w", err)
		}
		p.conns[fc.cluster] = conn
	}
	if pl.extproc != nil {
		p.conn = p.conns[pl.extproc.cluster]
	}
	return p, nil
}

// transport reaches one host over HTTP/1.1, whatever the request URL.
func transport(h *host) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	cfg := h.tls
	if cfg != nil && h.autoSNI {
		cfg = cfg.Clone()
		cfg.ServerName = h.hostname
	}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, h.addr)
		},
		TLSClientConfig:     cfg,
		DisableCompression:  true, // Envoy forwards accept-encoding as it is
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 64,
	}
}

// ListenAddress is the bootstrap listener's address.
func (p *Proxy) ListenAddress() string { return p.plan.listen }

// Close closes the gRPC connections and idle upstream connections.
func (p *Proxy) Close() error {
	for _, c := range p.plan.clusters {
		for _, h := range c.lb.hosts {
			if h.transport != nil {
				h.transport.CloseIdleConnections()
			}
		}
	}
	var err error
	for _, conn := range p.conns {
		err = errors.Join(err, conn.Close())
	}
	return err
}

// ServeHTTP processes one request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := p.newExchange(w, r)
	defer x.finish()
	x.run()
}

// requestIDs generates x-request-id values.
type requestIDs struct {
	mu sync.Mutex
	n  uint64
}

func (g *requestIDs) next() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n++
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", time.Now().Unix(), g.n)
}

var errAbort = errors.New("abort")
