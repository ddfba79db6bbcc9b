package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// fakeREST is the part of an Iceberg REST catalog that authentication
// meets: the OAuth2 token endpoint and the config endpoint, which record
// what they were sent; every other request is answered 404.
type fakeREST struct {
	mu        sync.Mutex
	configAut []string // Authorization headers of /v1/config
	tokenForm []string // client_id:client_secret sent to the token endpoint
}

func (f *fakeREST) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/oauth/tokens":
		_ = r.ParseForm()
		f.tokenForm = append(f.tokenForm, r.Form.Get("client_id")+":"+r.Form.Get("client_secret"))
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok-from-credential", "token_type": "bearer", "expires_in": 3600,
			"issued_token_type": "urn:ietf:params:oauth:token-type:access_token"})
	case "/v1/config":
		f.configAut = append(f.configAut, r.Header.Get("Authorization"))
		_ = json.NewEncoder(w).Encode(map[string]any{"defaults": map[string]string{}, "overrides": map[string]string{}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "not here", "type": "NoSuchTableException", "code": 404}})
	}
}

// TestRESTCatalogAuthenticatesFromProperties: the Iceberg properties of a
// secured REST catalog in catalog.properties (a bearer token, or OAuth2
// client credentials exchanged at the token endpoint) authenticate the
// very first request, the catalog's config.
func TestRESTCatalogAuthenticatesFromProperties(t *testing.T) {
	for _, tc := range []struct {
		name, props, wantAuth, wantForm string
	}{
		{"token", "    token: tok-in-config\n", "Bearer tok-in-config", ""},
		{"credential", "    credential: streamidx:s3cret\n", "Bearer tok-from-credential", "streamidx:s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeREST{}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := newCLI(t, "file://"+t.TempDir(), "catalog:\n  properties:\n"+tc.props)
			// The catalog flags of the harness point at SQLite: these point
			// at the REST catalog instead (the last given wins).
			_, _, _ = c.run("list", "--table", "ns.orders", "--catalog-uri", srv.URL, "--warehouse", "file://"+t.TempDir())
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.configAut) == 0 || f.configAut[0] != tc.wantAuth {
				t.Errorf("the config request carried Authorization %q, want %q", f.configAut, tc.wantAuth)
			}
			if tc.wantForm != "" && (len(f.tokenForm) == 0 || f.tokenForm[0] != tc.wantForm) {
				t.Errorf("the token endpoint was sent %q, want the client credentials %q", f.tokenForm, tc.wantForm)
			}
		})
	}
}
