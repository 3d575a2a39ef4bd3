package limitertest

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Link is the way a client reaches its store (a real Redis), which a test
// cuts to play an outage: a Redis client dialing through Dial (go-redis's
// Options.Dialer) loses its connections when Cut(true) is called and
// cannot dial until Cut(false). Every call fails at once then, with no
// timing involved.
type Link struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// ErrLinkCut is the error of a dial while the link is cut.
var ErrLinkCut = errors.New("dial tcp: connect: connection refused (link cut by the test)")

// Dial dials addr unless the link is cut.
func (l *Link) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut {
		return nil, ErrLinkCut
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		l.conns = append(l.conns, c)
	}
	return c, err
}

// Cut cuts the link, closing the connections dialed through it, or mends
// it.
func (l *Link) Cut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}
