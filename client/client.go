// Package client is the Go client of the streamidx lookup service
// (`streamidx serve`, `streamidx run --serve`).
//
//	c := client.New("http://127.0.0.1:9465", client.Options{Token: os.Getenv("STREAMIDX_SERVE_TOKEN")})
//	ans, err := c.Lookup(ctx, "sales.orders", "pk", client.Request{Where: "id = 42"})
//
// A Client is safe for concurrent use.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/streamidx/streamidx/api"
)

// Options configure a Client. The zero value selects the defaults.
type Options struct {
	// Token is sent as a bearer token when set. Default: none.
	Token string
	// HTTPClient makes the requests. Default: a client that keeps up to
	// 64 idle connections to the service, so that concurrent callers reuse
	// them (http.DefaultClient keeps 2).
	HTTPClient *http.Client
	// TLSConfig is the TLS configuration of the default client, for a
	// service at an https:// URL whose certificate the system does not
	// trust (see LoadCA). Default: the system's roots.
	TLSConfig *tls.Config
	// Retry says when a call is made again. Default: never.
	Retry Retry
}

// Retry makes a call again, up to Attempts more times, when the service
// refused it for now (503 overloaded: after the Retry-After it names) or
// could not be reached (a refused or broken connection: a service being
// restarted; after 50 ms, doubled at each attempt), each wait at most
// MaxWait. Every call of a Client only reads, so a call made twice answers
// as once. Errors that another attempt would meet again (a bad predicate,
// an unknown index, a timeout of the service) are returned at once, as is
// the context's end.
type Retry struct {
	Attempts int
	// MaxWait caps each wait. Default: 5s.
	MaxWait time.Duration
}

// wait is how long to wait before attempt (1 for the first retry) after
// err, and whether to make it.
func (r Retry) wait(attempt int, err error, retryAfter string) (time.Duration, bool) {
	if attempt > r.Attempts {
		return 0, false
	}
	limit := r.MaxWait
	if limit <= 0 {
		limit = 5 * time.Second
	}
	var e *Error
	switch {
	case errors.As(err, &e) && e.Status == http.StatusServiceUnavailable:
		d := time.Second
		if secs, perr := strconv.Atoi(strings.TrimSpace(retryAfter)); perr == nil && secs >= 0 {
			d = time.Duration(secs) * time.Second
		}
		return min(d, limit), true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// Nothing listens (yet), or the connection broke: a service
		// being restarted.
		d := 50 * time.Millisecond
		for i := 1; i < attempt && d < limit; i++ {
			d *= 2
		}
		return min(d, limit), true
	default:
		return 0, false
	}
}

// LoadCA returns a TLS configuration that trusts the certificates of the
// PEM file (the service's own certificate, or the authority that signed
// it), for Options.TLSConfig.
func LoadCA(file string) (*tls.Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read certificate authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("certificate authority %s: no PEM certificate in it", file)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Client calls the lookup service at one base URL.
type Client struct {
	base string
	opts Options
}

// New returns a client of the service at base, such as
// http://127.0.0.1:9465.
func New(base string, opts Options) *Client {
	if opts.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		if opts.TLSConfig != nil {
			// A copy: the transport adds its protocols to the config it
			// is given, which another transport may share.
			tr.TLSClientConfig = opts.TLSConfig.Clone()
		}
		opts.HTTPClient = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(base, "/"), opts: opts}
}

// Request is one lookup.
type Request = api.LookupRequest

// Header says which snapshots answered a lookup.
type Header = api.Header

// Answer is a lookup's JSON-lines answer.
type Answer struct {
	Header Header
	// Rows are the rows as `streamidx lookup --json` prints them, one JSON
	// object each, without the newline.
	Rows []json.RawMessage
	// Explain is the plan line, when the request asked for it.
	Explain json.RawMessage
}

// Error is an answer other than 200.
type Error struct {
	Status int
	// Code is the service's word for the error, such as bad_predicate,
	// too_many_rows or no_such_index.
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("streamidx serve: %d %s: %s", e.Status, e.Code, e.Message)
}

// IsStatus reports whether err is an *Error with the given HTTP status.
func IsStatus(err error, status int) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == status
}

// Close closes the client's idle connections to the service.
func (c *Client) Close() { c.opts.HTTPClient.CloseIdleConnections() }

func (c *Client) indexURL(tableName, index string) string {
	return c.base + "/v1/tables/" + url.PathEscape(tableName) + "/indexes/" + url.PathEscape(index)
}

func (c *Client) do(ctx context.Context, method, u string, body any, accept string) (*http.Response, error) {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	for attempt := 1; ; attempt++ {
		resp, retryAfter, err := c.call(ctx, method, u, data, accept)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		d, again := c.opts.Retry.wait(attempt, err, retryAfter)
		if !again {
			return nil, err
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// call makes one request; retryAfter is the Retry-After of an answer other
// than 200.
func (c *Client) call(ctx context.Context, method, u string, data []byte, accept string) (resp *http.Response, retryAfter string, err error) {
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, "", err
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err = c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("the lookup service at %s does not answer: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(msg))}
		var body api.ErrorBody
		if json.Unmarshal(msg, &body) == nil && body.Error != "" {
			e.Code, e.Message = body.Code, body.Error
		}
		return nil, resp.Header.Get("Retry-After"), e
	}
	return resp, "", nil
}

// Lookup asks for the rows matching q.Where through index of tableName
// (NS.TABLE), as JSON lines.
func (c *Client) Lookup(ctx context.Context, tableName, index string, q Request) (*Answer, error) {
	resp, err := c.do(ctx, http.MethodPost, c.indexURL(tableName, index)+"/lookup", q, api.NDJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// The buffer starts small and grows to the longest line (up to 64
	// MiB): a one-key answer is a few hundred bytes, and a buffer made
	// large up front for every lookup was most of a busy client's
	// allocation, and of its time in the garbage collector.
	sc.Buffer(nil, 64<<20)
	ans := &Answer{}
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			first = false
			var h api.HeaderLine
			if err := json.Unmarshal(line, &h); err != nil {
				return nil, fmt.Errorf("read the answer's header line: %w", err)
			}
			ans.Header = h.Streamidx
			continue
		}
		if q.Explain && bytes.HasPrefix(line, []byte(`{"explain":`)) {
			ans.Explain = append(json.RawMessage(nil), line...)
			continue
		}
		ans.Rows = append(ans.Rows, append(json.RawMessage(nil), line...))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if first {
		return nil, errors.New("read the answer: it is empty")
	}
	if int64(len(ans.Rows)) != ans.Header.Rows {
		return nil, fmt.Errorf("read the answer: %d rows, its header says %d: it was cut short", len(ans.Rows), ans.Header.Rows)
	}
	return ans, nil
}

// ArrowAnswer is a lookup's Arrow IPC answer. Release it when done.
type ArrowAnswer struct {
	IndexSnapshotID, TableSnapshotID int64
	Schema                           *arrow.Schema
	Batches                          []arrow.RecordBatch
}

// NumRows counts the rows of the batches.
func (a *ArrowAnswer) NumRows() int64 {
	n := int64(0)
	for _, b := range a.Batches {
		n += b.NumRows()
	}
	return n
}

// Release releases the batches.
func (a *ArrowAnswer) Release() {
	for _, b := range a.Batches {
		b.Release()
	}
	a.Batches = nil
}

// LookupArrow asks for the rows matching q.Where as an Arrow IPC stream.
func (c *Client) LookupArrow(ctx context.Context, tableName, index string, q Request) (*ArrowAnswer, error) {
	resp, err := c.do(ctx, http.MethodPost, c.indexURL(tableName, index)+"/lookup", q, api.ArrowStream)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ans := &ArrowAnswer{}
	fmt.Sscan(resp.Header.Get(api.HeaderIndexSnapshot), &ans.IndexSnapshotID)
	fmt.Sscan(resp.Header.Get(api.HeaderTableSnapshot), &ans.TableSnapshotID)
	rd, err := ipc.NewReader(resp.Body, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return nil, fmt.Errorf("read the arrow answer: %w", err)
	}
	defer rd.Release()
	ans.Schema = rd.Schema()
	for rd.Next() {
		b := rd.RecordBatch()
		b.Retain()
		ans.Batches = append(ans.Batches, b)
	}
	if err := rd.Err(); err != nil {
		ans.Release()
		return nil, fmt.Errorf("read the arrow answer: %w", err)
	}
	return ans, nil
}

// LookupArrowTo writes the Arrow IPC stream of the rows matching q.Where to
// w as the service sends it, without decoding it (pyarrow's
// ipc.open_stream, arrow-go's ipc.NewReader read it), and returns the ids
// of the index snapshot it was read from and of the table snapshot it is
// exact for.
func (c *Client) LookupArrowTo(ctx context.Context, tableName, index string, q Request, w io.Writer) (indexSnapshotID, tableSnapshotID int64, err error) {
	resp, err := c.do(ctx, http.MethodPost, c.indexURL(tableName, index)+"/lookup", q, api.ArrowStream)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	fmt.Sscan(resp.Header.Get(api.HeaderIndexSnapshot), &indexSnapshotID)
	fmt.Sscan(resp.Header.Get(api.HeaderTableSnapshot), &tableSnapshotID)
	if _, err := io.Copy(w, resp.Body); err != nil {
		return 0, 0, fmt.Errorf("copy the arrow answer: %w", err)
	}
	return indexSnapshotID, tableSnapshotID, nil
}

// Indexes lists the indexes of a table, as `streamidx list` shows them.
func (c *Client) Indexes(ctx context.Context, tableName string) ([]api.IndexEntry, error) {
	resp, err := c.do(ctx, http.MethodGet, c.base+"/v1/tables/"+url.PathEscape(tableName)+"/indexes", nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.IndexList
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("read the index list: %w", err)
	}
	return out.Indexes, nil
}

// Inspect describes an index as `streamidx inspect --json` prints it;
// snapshot picks the index snapshot whose range files are listed (0: the
// current one).
func (c *Client) Inspect(ctx context.Context, tableName, index string, snapshot int64) (*api.Inspection, error) {
	u := c.indexURL(tableName, index)
	if snapshot != 0 {
		u += fmt.Sprintf("?snapshot=%d", snapshot)
	}
	resp, err := c.do(ctx, http.MethodGet, u, nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out api.Inspection
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("read the index description: %w", err)
	}
	return &out, nil
}
