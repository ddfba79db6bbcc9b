package serve_test

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/streamidx/streamidx/internal/indexinfo"
	"github.com/streamidx/streamidx/serve"
)

// openAPI is the part of docs/openapi.yaml the test checks.
type openAPI struct {
	OpenAPI    string                               `yaml:"openapi"`
	Paths      map[string]map[string]map[string]any `yaml:"paths"`
	Components struct {
		Schemas map[string]struct {
			Properties map[string]any `yaml:"properties"`
		} `yaml:"schemas"`
	} `yaml:"components"`
}

func loadOpenAPI(t *testing.T) (openAPI, []string) {
	t.Helper()
	data, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc openAPI
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	var raw struct {
		Components struct {
			Schemas struct {
				Error struct {
					Properties struct {
						Code struct {
							Enum []string `yaml:"enum"`
						} `yaml:"code"`
					} `yaml:"properties"`
				} `yaml:"Error"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	return doc, raw.Components.Schemas.Error.Properties.Code.Enum
}

// TestOpenAPIDescribesTheService: every endpoint of docs/openapi.yaml
// answers 200 on a real service, the schemas of the header line, the
// request body and the index list have exactly the fields the service
// writes, and the error codes are exactly those the service answers.
func TestOpenAPIDescribesTheService(t *testing.T) {
	doc, codes := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	f := newFixture(t, 20)
	base := f.base
	calls := 0
	for path, methods := range doc.Paths {
		url := base + strings.NewReplacer("{table}", "test.orders", "{index}", "pk").Replace(path)
		for method := range methods {
			var req *http.Request
			var err error
			switch {
			case method == "post":
				req, err = http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader([]byte(`{"where":"id = 3","limit":5}`)))
			case strings.HasSuffix(path, "/lookup"):
				req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, url+"?where=id+%3D+3&explain=true", nil)
			default:
				req, err = http.NewRequestWithContext(context.Background(), strings.ToUpper(method), url, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d, want 200", strings.ToUpper(method), path, resp.StatusCode)
			}
			calls++
		}
	}
	if calls != 4 {
		t.Errorf("the spec has %d operations, want 4 (list, inspect, lookup by GET and by POST)", calls)
	}

	for name, typ := range map[string]reflect.Type{"Header": reflect.TypeOf(serve.Header{}), "LookupRequest": reflect.TypeOf(serve.LookupRequest{}),
		"IndexEntry": reflect.TypeOf(indexinfo.Entry{}), "IndexDescription": reflect.TypeOf(indexinfo.Inspection{})} {
		var want []string
		for i := range typ.NumField() {
			if tag := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]; tag != "" && tag != "-" {
				want = append(want, tag)
			}
		}
		var got []string
		for p := range doc.Components.Schemas[name].Properties {
			got = append(got, p)
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s has properties %v, the service writes %v", name, got, want)
		}
	}

	// The codes the service's source answers with (client_closed is
	// counted, never sent).
	var answered []string
	re := regexp.MustCompile(`apiError\{[^,]+, "([a-z_]+)"`)
	files, _ := os.ReadDir(".")
	for _, fi := range files {
		if !strings.HasSuffix(fi.Name(), ".go") || strings.HasSuffix(fi.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(fi.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(src, -1) {
			if c := string(m[1]); c != "client_closed" && !slices.Contains(answered, c) {
				answered = append(answered, c)
			}
		}
	}
	sort.Strings(answered)
	sort.Strings(codes)
	if !slices.Equal(codes, answered) {
		t.Errorf("the spec's error codes %v, the service answers %v", codes, answered)
	}
}
