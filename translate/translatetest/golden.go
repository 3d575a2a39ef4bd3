package translatetest

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
)

// update is the one -update flag of the translators' tests. Every
// translator test imports this package, so none registers its own.
var update = flag.Bool("update", false, "rewrite golden files under testdata")

// Golden compares got with the file at path or, with -update, first
// rewrites the file (and the folders it needs).
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run go test -update and review the diff); -want +got:\n%s", path, cmp.Diff(string(want), string(got)))
	}
}

// UpstreamJSON renders what a translator's RequestBody returned as indented
// JSON with a trailing newline: the upstream request's path, headers and
// body, or, for an *openai.RequestError, {"client_error": {param, code,
// message}}. Any other error, or a body that is not JSON, fails the test.
func UpstreamJSON(t testing.TB, up translate.Upstream, err error) []byte {
	t.Helper()
	var out any
	if ce, ok := clientError(err); ok {
		out = map[string]any{"client_error": ce}
	} else if err != nil {
		t.Fatalf("RequestBody: %v", err)
	} else {
		var body any
		if err := json.Unmarshal(up.Body, &body); err != nil {
			t.Fatalf("upstream body is not JSON: %v", err)
		}
		out = map[string]any{"path": up.Path, "headers": up.Headers, "body": body}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// clientError finds an *openai.RequestError in err's chain, through the
// method it has for packages that cannot import openai (openai's internal
// tests import this one).
func clientError(err error) (map[string]string, bool) {
	var ce interface {
		ClientError() (param, code, message string)
	}
	if !errors.As(err, &ce) {
		return nil, false
	}
	param, code, message := ce.ClientError()
	return map[string]string{"param": param, "code": code, "message": message}, true
}
