// Package spec validates JSON bodies and SSE events against the official
// OpenAI OpenAPI document in testdata/spec/openai, for tests. It is the
// schema oracle for everything the gateway emits.
//
// The document is OpenAPI 3.1, whose schemas are JSON Schema 2020-12, but it
// still uses the draft 2019-09 $recursiveRef in one place (see
// rewriteRecursive) and the OpenAPI 3.0 keyword `nullable: true` in places. A JSON
// Schema validator ignores that keyword, so loading rewrites it: a schema
// with `nullable: true` becomes `anyOf: [<schema>, {type: null}]`, which is
// what the document means.
//
// The compiled document is cached once per process (a sync.OnceValues in
// this test-helper package; compiling it takes about a second).
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"modelgate/translate/sse"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const docURL = "mem://openai/openapi.json"

var load = sync.OnceValues(compileDoc)

type compiled struct {
	c  *jsonschema.Compiler
	mu sync.Mutex
	by map[string]*jsonschema.Schema
}

func compileDoc() (*compiled, error) {
	path, err := docPath()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	rewriteRecursive(doc)
	if err := c.AddResource(docURL, rewriteNullable(doc)); err != nil {
		return nil, err
	}
	return &compiled{c: c, by: map[string]*jsonschema.Schema{}}, nil
}

// docPath finds testdata/spec/openai/openapi.json from this source file.
func docPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("spec: cannot locate the module")
	}
	for dir := filepath.Dir(file); dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "spec", "openai", "openapi.json"), nil
		}
	}
	return "", errors.New("spec: go.mod not found above " + file)
}

// rewriteRecursive replaces the draft 2019-09 pair $recursiveAnchor /
// $recursiveRef "#" (CompoundFilter uses it), which 2020-12 dropped, with a
// plain $ref to the component that holds the anchor.
func rewriteRecursive(doc any) {
	root, _ := doc.(map[string]any)
	comps, _ := root["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for name, sch := range schemas {
		m, ok := sch.(map[string]any)
		if !ok || m["$recursiveAnchor"] == nil {
			continue
		}
		delete(m, "$recursiveAnchor")
		replaceRecursiveRef(m, "#/components/schemas/"+name)
	}
}

func replaceRecursiveRef(v any, ref string) {
	switch t := v.(type) {
	case map[string]any:
		if t["$recursiveRef"] != nil {
			delete(t, "$recursiveRef")
			t["$ref"] = ref
		}
		for _, child := range t {
			replaceRecursiveRef(child, ref)
		}
	case []any:
		for _, child := range t {
			replaceRecursiveRef(child, ref)
		}
	}
}

// rewriteNullable turns OpenAPI 3.0 nullable into JSON Schema.
func rewriteNullable(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			t[k] = rewriteNullable(child)
		}
		if t["nullable"] == true {
			delete(t, "nullable")
			inner := map[string]any{}
			for k, child := range t {
				if k != "description" && k != "default" && k != "title" {
					inner[k] = child
					delete(t, k)
				}
			}
			t["anyOf"] = []any{inner, map[string]any{"type": "null"}}
		}
		return t
	case []any:
		for i, child := range t {
			t[i] = rewriteNullable(child)
		}
	}
	return v
}

func (c *compiled) schema(name string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.by[name]; ok {
		return s, nil
	}
	s, err := c.c.Compile(docURL + "#/components/schemas/" + name)
	if err != nil {
		return nil, fmt.Errorf("compiling schema %s: %w", name, err)
	}
	c.by[name] = s
	return s, nil
}

// Validate checks body against the component schema of that name, such as
// CreateChatCompletionResponse.
func Validate(schema string, body []byte) error {
	c, err := load()
	if err != nil {
		return err
	}
	s, err := c.schema(schema)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", schema, err)
	}
	return nil
}

// ValidateT fails the test if body does not validate.
func ValidateT(t testing.TB, schema string, body []byte) {
	t.Helper()
	if err := Validate(schema, body); err != nil {
		t.Errorf("body does not validate: %v\nbody: %s", err, body)
	}
}

// ValidateSSE validates every data event of an SSE body against schema:
// an event with a top-level "error" against ErrorResponse (a Responses
// stream's own error events are typed "error" and validate against
// schema); "[DONE]" may only come last.
func ValidateSSE(t testing.TB, schema string, stream []byte) {
	t.Helper()
	var d sse.Decoder
	events := d.Feed(stream)
	if d.Pending() {
		t.Errorf("the stream ends inside an event: %q", stream)
	}
	for i, ev := range events {
		if string(ev.Data) == "[DONE]" {
			if i != len(events)-1 {
				t.Errorf("[DONE] is event %d of %d, want it last", i, len(events))
			}
			continue
		}
		name := schema
		var probe struct {
			Error json.RawMessage `json:"error"`
			Type  string          `json:"type"`
		}
		if json.Unmarshal(ev.Data, &probe) == nil && probe.Error != nil && probe.Type != "error" {
			name = "ErrorResponse"
		}
		if err := Validate(name, ev.Data); err != nil {
			t.Errorf("event %d does not validate: %v\nevent: %s", i, err, ev.Data)
		}
	}
}
