package translatetest_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

func TestUpstreamJSON(t *testing.T) {
	up := translate.Upstream{Path: "/v1/x", Headers: []translate.Header{{Name: "authorization", Value: "Bearer k"}}, Body: []byte(`{"b":1,"a":"<&>"}`)}
	want := `{
  "body": {
    "a": "\u003c\u0026\u003e",
    "b": 1
  },
  "headers": [
    {
      "Name": "authorization",
      "Value": "Bearer k"
    }
  ],
  "path": "/v1/x"
}
`
	if got := string(translatetest.UpstreamJSON(t, up, nil)); got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

// UpstreamJSON knows *api.RequestError by name, since it cannot import
// openai: a rename or a wrapped error must still render as a client error.
func TestUpstreamJSONClientError(t *testing.T) {
	re := &api.RequestError{Param: "size", Code: "invalid_value", Message: "bad <size>", Status: 400}
	want := `{
  "client_error": {
    "code": "invalid_value",
    "message": "bad \u003csize\u003e",
    "param": "size"
  }
}
`
	for _, err := range []error{re, fmt.Errorf("wrapped: %w", re)} {
		if got := string(translatetest.UpstreamJSON(t, translate.Upstream{}, err)); got != want {
			t.Errorf("%v: got %s\nwant %s", err, got, want)
		}
	}
}

// errorf records what Golden reports.
type errorf struct {
	testing.TB
	msg string
}

func (e *errorf) Errorf(format string, args ...any) { e.msg = fmt.Sprintf(format, args...) }

func TestGolden(t *testing.T) {
	// Under go test -update, Golden would rewrite the file instead.
	was := flag.Lookup("update").Value.String()
	flag.Set("update", "false")
	t.Cleanup(func() { flag.Set("update", was) })
	path := filepath.Join(t.TempDir(), "a.json")
	if err := os.WriteFile(path, []byte("same\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	translatetest.Golden(t, path, []byte("same\n"))
	rec := &errorf{TB: t}
	translatetest.Golden(rec, path, []byte("other\n"))
	if !strings.Contains(rec.msg, "run go test -update and review the diff") || !strings.Contains(rec.msg, "other") {
		t.Errorf("a difference reports %q", rec.msg)
	}
}
