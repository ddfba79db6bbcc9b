package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/streamidx/streamidx/api"
	"github.com/streamidx/streamidx/planner"
	"github.com/streamidx/streamidx/planner/reconcile"
)

// The bodies of a lookup (see package api).
type (
	LookupRequest = api.LookupRequest
	Header        = api.Header
	HeaderLine    = api.HeaderLine
)

func (s *Service) parseLookup(r *http.Request) (LookupRequest, error) {
	var q LookupRequest
	bad := func(format string, args ...any) error {
		return &apiError{http.StatusBadRequest, "bad_request", fmt.Sprintf(format, args...)}
	}
	tooLong := func(n int) error {
		return &apiError{http.StatusRequestEntityTooLarge, "predicate_too_large",
			fmt.Sprintf("the predicate is %d bytes, more than the %d of serve.max-predicate-bytes", n, s.opts.MaxPredicateBytes)}
	}
	if r.Method == http.MethodPost {
		// The body is the predicate and a few small fields.
		limit := int64(s.opts.MaxPredicateBytes) + 4096
		body := http.MaxBytesReader(nil, r.Body, limit)
		dec := json.NewDecoder(body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&q); err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return q, tooLong(int(limit) + 1)
			}
			return q, bad("request body: %v (want a JSON object with where, snapshot, limit, explain)", err)
		}
		discard(r.Body)
	} else {
		v := r.URL.Query()
		q.Where = v.Get("where")
		var err error
		if q.Snapshot, err = intParam(v.Get("snapshot"), "snapshot"); err != nil {
			return q, err
		}
		if q.Limit, err = intParam(v.Get("limit"), "limit"); err != nil {
			return q, err
		}
		if e := v.Get("explain"); e != "" {
			if q.Explain, err = strconv.ParseBool(e); err != nil {
				return q, bad("explain %q: want true or false", e)
			}
		}
	}
	if len(q.Where) > s.opts.MaxPredicateBytes {
		return q, tooLong(len(q.Where))
	}
	if strings.TrimSpace(q.Where) == "" {
		return q, &apiError{http.StatusBadRequest, "bad_predicate", `where is blank: give a condition, such as "id = 42"`}
	}
	if q.Limit < 0 {
		return q, bad("limit %d: must not be negative", q.Limit)
	}
	if q.Snapshot < 0 {
		return q, bad("snapshot %d: must not be negative", q.Snapshot)
	}
	return q, nil
}

// wantsArrow reports whether the client accepts an Arrow IPC stream.
func wantsArrow(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == ArrowStream {
			return true
		}
	}
	return false
}

// maxAttempts bounds the retries of a lookup whose index snapshot expired
// while it read it.
const maxAttempts = 3

func (s *Service) lookup(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parseLookup(r)
	if err != nil {
		return err
	}
	// A predicate that does not parse is refused before any catalog is read.
	pred, err := planner.Parse(q.Where)
	if err != nil {
		return err
	}
	// The planner stops one row past the row limit, which tells an answer
	// at the limit from one beyond it.
	limit := q.Limit
	if limit == 0 || limit > s.opts.MaxRows {
		limit = s.opts.MaxRows + 1
	}
	var res *planner.Result
	var hdr Header
	for attempt := 1; ; attempt++ {
		t, err := s.loadIndex(r.Context(), r.PathValue("table"), r.PathValue("index"), q.Snapshot, attempt > 1)
		if err != nil {
			return err
		}
		if q.Snapshot != 0 && t.Table.SnapshotByID(q.Snapshot) == nil {
			return &apiError{http.StatusNotFound, "no_such_snapshot", fmt.Sprintf("table %s has no snapshot %d", t.TableName, q.Snapshot)}
		}
		res, err = s.planner.Lookup(r.Context(), reconcile.Table(t.Table), t.Metadata, planner.Query{Where: q.Where, Parsed: pred, TableSnapshotID: q.Snapshot, Limit: limit})
		if err != nil && isGone(err) && attempt < maxAttempts {
			s.metrics.retries.Inc()
			continue
		}
		if err != nil {
			return err
		}
		hdr = Header{Table: t.TableName, Index: t.IndexName}
		break
	}
	defer res.Release()
	if res.NumRows() > s.opts.MaxRows {
		return &apiError{http.StatusUnprocessableEntity, "too_many_rows",
			fmt.Sprintf("the answer has more than %d rows (serve.max-rows): give a limit or narrow the predicate", s.opts.MaxRows)}
	}
	p := res.Plan
	hdr.IndexSnapshotID, hdr.SourceSnapshotID, hdr.TableSnapshotID = p.IndexSnapshotID, p.SourceSnapshotID, p.TableSnapshotID
	// Stopping at the service's limit + 1 was refused above: truncated is
	// the request's own limit.
	hdr.CommitsBehind, hdr.Rows, hdr.Truncated = p.CommitsBehind, res.NumRows(), res.Truncated
	w.Header().Set(HeaderIndexSnapshot, strconv.FormatInt(hdr.IndexSnapshotID, 10))
	w.Header().Set(HeaderTableSnapshot, strconv.FormatInt(hdr.TableSnapshotID, 10))
	s.metrics.rows.Add(float64(hdr.Rows))
	if wantsArrow(r) {
		w.Header().Set("Content-Type", ArrowStream)
		iw := ipc.NewWriter(w, ipc.WithSchema(res.Schema))
		for _, b := range res.Batches {
			if err := iw.Write(b); err != nil {
				return fmt.Errorf("write arrow stream: %w", err)
			}
		}
		return iw.Close()
	}
	w.Header().Set("Content-Type", api.NDJSON)
	if err := json.NewEncoder(w).Encode(HeaderLine{Streamidx: hdr}); err != nil {
		return err
	}
	return res.WriteJSONLines(w, q.Explain)
}
