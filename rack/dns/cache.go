package dns

import (
	"container/list"
	"strings"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// staleTTL is the TTL of an answer served stale (RFC 8767 suggests 30 s).
const staleTTL = 30

// maxCacheTTL caps how long any answer is cached.
const maxCacheTTL = 24 * time.Hour

// cacheKey names a question: name (lower case), type and class.
type cacheKey struct {
	name          string
	qtype, qclass uint16
}

func keyOf(q mdns.Question) cacheKey {
	return cacheKey{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass}
}

// entry is a cached answer. serial is the region serial it was fetched at (region zones
// only): an answer of an older serial is stale, whatever its TTL says.
type entry struct {
	key        cacheKey
	msg        *mdns.Msg
	stored     time.Time
	expires    time.Time
	fromRegion bool   // a region zone's answer; else an upstream's
	region     string // the region's UUID (region zones only)
	serial     uint32
}

// from says whether e came from where a query now goes (ours: to the region of st, else to
// the upstreams).
func (e *entry) from(st *Settings, ours bool) bool {
	return e.fromRegion == ours && (!ours || e.region == st.Region)
}

// cache is a bounded LRU of answers.
type cache struct {
	mu    sync.Mutex
	max   int
	items map[cacheKey]*list.Element
	lru   *list.List // front: most recently used
}

func newCache(max int) *cache {
	return &cache{max: max, items: map[cacheKey]*list.Element{}, lru: list.New()}
}

// get returns the entry for k, if any, fresh or not.
func (c *cache) get(k cacheKey) (*entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*entry), true
}

// put stores e, evicting the least recently used entry when full.
func (c *cache) put(e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.key]; ok {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.items[e.key] = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.items, old.Value.(*entry).key)
	}
}

// drop removes k's entry (an answer too stale to ever serve again).
func (c *cache) drop(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		c.lru.Remove(el)
		delete(c.items, k)
	}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// cacheTTL is how long an answer may be cached: the smallest TTL of its records for a
// positive answer, the SOA's negative TTL for NXDOMAIN and NODATA; 0 for what must not be
// cached (failures, truncated answers, negative answers without SOA).
func cacheTTL(m *mdns.Msg) time.Duration {
	if m.Truncated || (m.Rcode != mdns.RcodeSuccess && m.Rcode != mdns.RcodeNameError) {
		return 0
	}
	var ttl uint32
	found := false
	lower := func(t uint32) {
		if !found || t < ttl {
			ttl, found = t, true
		}
	}
	if m.Rcode == mdns.RcodeSuccess && len(m.Answer) > 0 {
		for _, rr := range m.Answer {
			lower(rr.Header().Ttl)
		}
	} else {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*mdns.SOA); ok {
				lower(min(soa.Hdr.Ttl, soa.Minttl))
			}
		}
	}
	return min(time.Duration(ttl)*time.Second, maxCacheTTL)
}

// reply is e's answer to req, with TTLs counted down by the time spent in the cache (or
// staleTTL when stale).
func (e *entry) reply(req *mdns.Msg, now time.Time, stale bool) *mdns.Msg {
	m := e.msg.Copy()
	m.Id = req.Id
	m.Question = req.Question
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, section := range [][]mdns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			switch {
			case stale:
				h.Ttl = staleTTL
			case h.Ttl > age:
				h.Ttl -= age
			default:
				h.Ttl = 0
			}
		}
	}
	return m
}
