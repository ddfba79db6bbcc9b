package serve

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamidx/streamidx/internal/objstore"
)

// metrics are the service's Prometheus metrics. The cache metrics read the
// store's counters, which count the reads of every part of the process
// that shares the store (the daemon's updates too).
type metrics struct {
	requests *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	rows     prometheus.Counter
	retries  prometheus.Counter
	inFlight prometheus.Gauge
	queued   prometheus.Gauge
	cache    prometheus.Collector
}

func newMetrics(store *objstore.Store) *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamidx_serve_requests_total", Help: "Requests answered by the lookup service, by endpoint and HTTP status.",
		}, []string{"endpoint", "status"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamidx_serve_request_seconds", Help: "Time to answer a request of the lookup service, by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5 ms to 16 s
		}, []string{"endpoint"}),
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamidx_serve_rows_total", Help: "Rows returned by lookups.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamidx_serve_lookup_retries_total", Help: "Lookups retried because their index snapshot expired while they read it.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamidx_serve_requests_in_flight", Help: "Requests of the lookup service being answered (waiting for a slot not included).",
		}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamidx_serve_requests_queued", Help: "Requests of the lookup service waiting for a slot (serve.max-concurrent-requests).",
		}),
		cache: &cacheCollector{store: store},
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.requests, m.seconds, m.rows, m.retries, m.inFlight, m.queued, m.cache} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

var (
	cacheHitsDesc = prometheus.NewDesc("streamidx_serve_cache_hits_total",
		"Reads served from the store's caches: decoded tracking files, range file footers.", []string{"cache"}, nil)
	cacheMissesDesc = prometheus.NewDesc("streamidx_serve_cache_misses_total",
		"Reads the store's caches could not serve.", []string{"cache"}, nil)
	cacheBytesDesc = prometheus.NewDesc("streamidx_serve_cache_bytes",
		"Bytes the store's caches hold (tracking: the files' sizes; footer: the footers' encoded sizes).", []string{"cache"}, nil)
	cacheEntriesDesc = prometheus.NewDesc("streamidx_serve_cache_entries",
		"Entries the store's caches hold.", []string{"cache"}, nil)
)

// cacheCollector reports the store's cache counters when scraped.
type cacheCollector struct{ store *objstore.Store }

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheHitsDesc
	ch <- cacheMissesDesc
	ch <- cacheBytesDesc
	ch <- cacheEntriesDesc
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.store.CacheStats()
	for _, x := range []struct {
		name string
		s    objstore.CacheStat
	}{{"tracking", st.Tracking}, {"footer", st.Footer}, {"lookup", st.Lookup}} {
		ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(x.s.Hits), x.name)
		ch <- prometheus.MustNewConstMetric(cacheMissesDesc, prometheus.CounterValue, float64(x.s.Misses), x.name)
		ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(x.s.Bytes), x.name)
		ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(x.s.Entries), x.name)
	}
}
