package authz

import "time"

// cacheEntry is a principal or an authentication error, until expires.
type cacheEntry struct {
	principal *Principal
	err       error
	expires   time.Time
}

// fifoCache is a map of entries bounded to limit, which evicts the oldest
// entry to make room. Entries share one TTL, so the oldest is also the
// first to expire (a key's own expiry only brings that forward); hits do no
// bookkeeping, so a read needs nothing but the map. It is not safe for
// concurrent use.
type fifoCache struct {
	limit int
	m     map[[32]byte]*cacheNode
	root  cacheNode // root.next is the oldest node, root.prev the newest
}

type cacheNode struct {
	hash       [32]byte
	entry      cacheEntry
	prev, next *cacheNode
}

func newFIFOCache(limit int) *fifoCache {
	c := &fifoCache{limit: limit, m: make(map[[32]byte]*cacheNode)}
	c.root.prev, c.root.next = &c.root, &c.root
	return c
}

// get returns the entry for hash, or nil if it is missing or expired at
// now. The entry is valid only until the cache is next changed.
func (c *fifoCache) get(hash [32]byte, now time.Time) *cacheEntry {
	n, ok := c.m[hash]
	if !ok || !now.Before(n.entry.expires) {
		return nil
	}
	return &n.entry
}

// put stores e for hash as the newest entry, evicting the oldest when full.
func (c *fifoCache) put(hash [32]byte, e cacheEntry) {
	n, ok := c.m[hash]
	if ok {
		c.unlink(n)
	} else {
		if len(c.m) >= c.limit {
			c.remove(c.root.next)
		}
		n = &cacheNode{hash: hash}
		c.m[hash] = n
	}
	n.entry = e
	n.prev, n.next = c.root.prev, &c.root
	n.prev.next, c.root.prev = n, n
}

func (c *fifoCache) delete(hash [32]byte) {
	if n, ok := c.m[hash]; ok {
		c.remove(n)
	}
}

func (c *fifoCache) remove(n *cacheNode) {
	c.unlink(n)
	delete(c.m, n.hash)
}

func (c *fifoCache) unlink(n *cacheNode) {
	n.prev.next, n.next.prev = n.next, n.prev
	n.prev, n.next = nil, nil
}

func (c *fifoCache) clear() {
	clear(c.m)
	c.root.prev, c.root.next = &c.root, &c.root
}
