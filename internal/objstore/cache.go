package objstore

import (
	"container/list"
	"sync"
)

// CacheStat counts one cache of a Store.
type CacheStat struct {
	Hits, Misses int64
	// Entries and Bytes are what the cache holds now; Bytes is the sum of
	// the sizes its entries were added with.
	Entries int
	Bytes   int64
}

// CacheStats are the counters of a Store's caches.
type CacheStats struct {
	// Tracking is the cache of decoded tracking files; an entry's size is
	// the file's.
	Tracking CacheStat
	// Footer is the cache of range file footers; an entry's size is the
	// footer's encoded size.
	Footer CacheStat
}

// CacheStats returns the counters of the store's caches.
func (s *Store) CacheStats() CacheStats {
	return CacheStats{Tracking: s.tracking.stat(), Footer: s.footers.stat()}
}

// lru keeps the most recently used values by key within a number of
// entries and a number of bytes (each 0 for no bound). It is safe for
// concurrent use.
type lru[V any] struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	bytes      int64
	hits, miss int64
	order      *list.List // of *lruItem[V], most recent first
	items      map[string]*list.Element
}

type lruItem[V any] struct {
	key  string
	v    V
	size int64
}

func newLRU[V any](maxEntries int, maxBytes int64) *lru[V] {
	return &lru[V]{maxEntries: maxEntries, maxBytes: maxBytes, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		c.miss++
		var zero V
		return zero, false
	}
	c.hits++
	c.order.MoveToFront(el)
	return el.Value.(*lruItem[V]).v, true
}

// put adds v, replacing what the cache holds for key. A value larger than
// the byte bound is not kept.
func (c *lru[V]) put(key string, v V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.maxBytes > 0 && size > c.maxBytes {
		return
	}
	if el, ok := c.items[key]; ok {
		it := el.Value.(*lruItem[V])
		c.bytes += size - it.size
		it.v, it.size = v, size
		c.order.MoveToFront(el)
	} else {
		c.items[key] = c.order.PushFront(&lruItem[V]{key: key, v: v, size: size})
		c.bytes += size
	}
	for c.order.Len() > 0 && ((c.maxEntries > 0 && c.order.Len() > c.maxEntries) || (c.maxBytes > 0 && c.bytes > c.maxBytes)) {
		c.removeElement(c.order.Back())
	}
}

func (c *lru[V]) removeElement(el *list.Element) {
	it := el.Value.(*lruItem[V])
	c.order.Remove(el)
	delete(c.items, it.key)
	c.bytes -= it.size
}

// remove drops key; it reports whether the cache held it.
func (c *lru[V]) remove(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if ok {
		c.removeElement(el)
	}
	return ok
}

// removeIf drops the entries for which drop is true and returns how many.
func (c *lru[V]) removeIf(drop func(key string, v V) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for el := c.order.Front(); el != nil; {
		next := el.Next()
		if it := el.Value.(*lruItem[V]); drop(it.key, it.v) {
			c.removeElement(el)
			n++
		}
		el = next
	}
	return n
}

func (c *lru[V]) stat() CacheStat {
	if c == nil {
		return CacheStat{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStat{Hits: c.hits, Misses: c.miss, Entries: c.order.Len(), Bytes: c.bytes}
}
