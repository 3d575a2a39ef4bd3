package standin

import (
	"context"
	"net"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
)

// Resolver looks up a DNS name's addresses, as net.Resolver.LookupIPAddr.
type Resolver func(ctx context.Context, host string) ([]net.IPAddr, error)

// WithResolver replaces the resolver of STRICT_DNS clusters, for tests
// that give a name several addresses.
func WithResolver(r Resolver) Option { return func(p *Proxy) { p.resolve = r } }

// resolveTimeout bounds each lookup when New resolves the clusters.
const resolveTimeout = 5 * time.Second

// expandStrictDNS makes a STRICT_DNS cluster's endpoint one host per
// address its name resolves to, as Envoy does (strict_dns_cluster.cc,
// ResolveTarget: a HostImpl per address of the answer, sharing the
// endpoint's hostname, metadata, weight and priority): load balancing,
// previous_hosts and outlier detection then see each address on its own.
// The lookup family is dns_lookup_family's. Names are resolved once, when
// New runs; Envoy re-resolves every dns_refresh_rate. A name that does not
// resolve stays one host, whose connections fail with a DNS error, which
// the router answers as Envoy does a DNS cluster without hosts (503 "no
// healthy upstream"). ext_proc clusters keep their one endpoint.
func (p *Proxy) expandStrictDNS(c *cluster, family clusterv3.Cluster_DnsLookupFamily) {
	b := c.lb
	var hosts []*host
	prios := make([][]*host, len(b.priorities))
	for _, h := range b.hosts {
		name, port, err := net.SplitHostPort(h.addr)
		var ips []net.IP
		if err == nil && net.ParseIP(name) == nil {
			ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
			addrs, lerr := p.resolve(ctx, name)
			cancel()
			if lerr == nil {
				ips = pickFamily(addrs, family)
			}
		}
		if len(ips) == 0 {
			hosts = append(hosts, h)
			prios[h.priority] = append(prios[h.priority], h)
			continue
		}
		seen := map[string]bool{}
		for _, ip := range ips {
			addr := net.JoinHostPort(ip.String(), port)
			if seen[addr] {
				continue
			}
			seen[addr] = true
			nh := &host{addr: addr, hostname: h.hostname, metadata: h.metadata, weight: h.weight, priority: h.priority,
				tls: h.tls, autoSNI: h.autoSNI}
			hosts = append(hosts, nh)
			prios[h.priority] = append(prios[h.priority], nh)
		}
	}
	b.hosts, b.priorities = hosts, prios
	if b.od != nil {
		b.od.hosts = hosts
	}
}

// pickFamily is dns_lookup_family: V4_PREFERRED (the generator's) and
// AUTO take one family, preferring IPv4 or IPv6, with the other as a
// fallback; V4_ONLY and V6_ONLY one; ALL both.
func pickFamily(addrs []net.IPAddr, family clusterv3.Cluster_DnsLookupFamily) []net.IP {
	var v4, v6 []net.IP
	for _, a := range addrs {
		if a.IP.To4() != nil {
			v4 = append(v4, a.IP)
		} else {
			v6 = append(v6, a.IP)
		}
	}
	switch family {
	case clusterv3.Cluster_V4_ONLY:
		return v4
	case clusterv3.Cluster_V6_ONLY:
		return v6
	case clusterv3.Cluster_ALL:
		return append(v4, v6...)
	case clusterv3.Cluster_V4_PREFERRED:
		if len(v4) > 0 {
			return v4
		}
		return v6
	}
	if len(v6) > 0 { // AUTO
		return v6
	}
	return v4
}
