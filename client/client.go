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
	"strings"

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
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if c.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the lookup service at %s does not answer: %w", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := &Error{Status: resp.StatusCode, Message: strings.TrimSpace(string(data))}
		var body api.ErrorBody
		if json.Unmarshal(data, &body) == nil && body.Error != "" {
			e.Code, e.Message = body.Code, body.Error
		}
		return nil, e
	}
	return resp, nil
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
