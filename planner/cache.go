package planner

import (
	"container/list"
	"sync"

	"github.com/streamidx/streamidx/format"
)

// tracking is a decoded tracking file with the clustering keys that bound
// its range files, ready for binary search.
type tracking struct {
	entries []format.TrackingEntry
	// groupMax[i] is the group_max_value key of entries[i]; nil for every
	// entry when some entry lacks one, which turns key pruning off.
	groupMax []format.Key
}

func newTracking(is *format.IndexSchema, entries []format.TrackingEntry) *tracking {
	t := &tracking{entries: entries, groupMax: make([]format.Key, len(entries))}
	for i := range entries {
		k, ok := entries[i].GroupMaxKey(is)
		if !ok {
			t.groupMax = nil
			break
		}
		t.groupMax[i] = k
	}
	return t
}

// trackingCache keeps the most recently used decoded tracking files. They
// are immutable, so an entry is valid as long as its path is; the bound is a
// number of files. It is safe for concurrent use.
type trackingCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cacheItem, most recent first
	items map[string]*list.Element
}

type cacheItem struct {
	path string
	t    *tracking
}

func newTrackingCache(max int) *trackingCache {
	return &trackingCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

func (c *trackingCache) get(path string) (*tracking, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[path]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheItem).t, true
}

func (c *trackingCache) put(path string, t *tracking) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[path]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[path] = c.order.PushFront(&cacheItem{path: path, t: t})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheItem).path)
	}
}
