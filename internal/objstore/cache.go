package objstore

import (
	"container/list"
	"context"
	"strings"
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
	// Lookup is the cache of what lookups derive from files (Cached); an
	// entry's size is the memory it holds, as its maker estimated it.
	Lookup CacheStat
}

// CacheStats returns the counters of the store's caches.
func (s *Store) CacheStats() CacheStats {
	return CacheStats{Tracking: s.tracking.stat(), Footer: s.footers.stat(), Lookup: s.lookups.stat()}
}

// Cached returns what the lookup cache holds under file and key, or makes
// it with make and keeps it, within Options.LookupCacheBytes (make returns
// the value and the memory it holds). Files are immutable, so what is
// derived from one stays right until the file is removed, which drops it.
// Callers that miss together wait for one make: eight lookups that meet a
// new table snapshot at once reconcile it once. That make works for all of
// them, so it gets ctx without its cancellation: a caller that gives up (a
// client gone, a request past its time limit) must not fail the others
// with its "context canceled". Without a cache, Cached always makes, with
// ctx as it is.
func Cached[V any](ctx context.Context, s *Store, file, key string, make func(ctx context.Context) (V, int64, error)) (V, error) {
	if s.opts.LookupCacheBytes <= 0 {
		v, _, err := make(ctx)
		return v, err
	}
	k := file + "\x00" + key
	if v, ok := s.lookups.get(k); ok {
		return v.(V), nil
	}
	v, err, _ := s.making.Do(k, func() (any, error) {
		if v, ok := s.lookups.peek(k); ok { // made while this caller waited to start
			return v, nil
		}
		v, size, err := make(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		s.lookups.put(k, v, size)
		return v, nil
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return v.(V), nil
}

// LookupCaching reports whether the store keeps a lookup cache.
func (s *Store) LookupCaching() bool { return s.opts.LookupCacheBytes > 0 }

// LookupCacheBytes is the bound of the lookup cache (Options.LookupCacheBytes).
func (s *Store) LookupCacheBytes() int64 { return max(s.opts.LookupCacheBytes, 0) }

// dropCached drops what the lookup cache holds for a file.
func (s *Store) dropCached(file string) {
	if s.opts.LookupCacheBytes == 0 {
		return
	}
	prefix := file + "\x00"
	s.lookups.removeIf(func(key string, _ any) bool { return strings.HasPrefix(key, prefix) })
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

// peek is get without counting a hit or a miss or refreshing the entry.
func (c *lru[V]) peek(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*lruItem[V]).v, true
	}
	var zero V
	return zero, false
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
