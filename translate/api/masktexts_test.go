package api_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/providers"
)

// chatBodies are chat requests of many shapes: string content and parts
// (text, image_url, cache_control), tool messages, an assistant's tool
// calls with content null, system and developer messages, escapes,
// members the gateway does not know, model after messages, keys folded
// or repeated as encoding/json reads them.
var chatBodies = []string{
	`{"model":"m","messages":[
		{"role":"system","content":"be brief"},
		{"role":"developer","content":[{"type":"text","text":"rules","cache_control":{"type":"ephemeral"}}]},
		{"role":"user","name":"u1","content":[{"type":"text","text":"look at this"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}},{"type":"text","text":"and this"}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"q\":\"look at this\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"result"},
		{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"part result"}]},
		{"role":"assistant","content":"earlier answer","refusal":null,"x_unknown":{"keep":[1,2.50,"earlier answer"]}},
		{"role":"function","name":"f","content":"old style"},
		{"role":"user","content":"again"}],
	 "temperature":0.5,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"x_vendor":{"a":"b"}}`,
	`{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":""},{"role":"user","content":[]}],
	  "model":"m","stream":true,"stream_options":{"include_usage":true}}`,
	"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"quote \\\" newline \\n lt \\u003c amp & sep \u2028 \\u2029 \u00e9 \u65e5\u672c \\ud83d\\ude00 </script>\"}]}",
	`{"model":"m","messages":[{"role":"user","content":"shadowed","CONTENT":"folded","Conte\u006et":"escaped key"},
		{"role":"user","content":[{"type":"text","text":"kept","Text":null},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
	`{"model":"m","model":"m","messages":[{"role":"user","content":"repeated keys"}],"messages":[{"role":"user","content":"the last"}]}`,
}

// messagesBodies are Messages API requests of many shapes: system as a
// string and as blocks with cache_control, text blocks, tool_result with
// string and block content, tool_use and thinking (which are not text),
// images, model after messages, repeated keys.
var messagesBodies = []string{
	`{"model":"m","max_tokens":10,"system":"be brief","messages":[{"role":"user","content":"hello"}],"metadata":{"user_id":"u"}}`,
	`{"model":"m","max_tokens":10,
		"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral","ttl":"1h"}},{"type":"text","text":"and kind"}],
		"messages":[
		{"role":"user","content":[{"type":"text","text":"look","cache_control":{"type":"ephemeral"}},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm look","signature":"sig=="},{"type":"redacted_thinking","data":"xyz"},
			{"type":"text","text":"earlier answer"},{"type":"tool_use","id":"t1","name":"f","input":{"q":"look"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"result"},
				{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}],"is_error":false},
			{"type":"tool_result","tool_use_id":"t2","content":"plain result","cache_control":{"type":"ephemeral"}},
			{"type":"tool_result","tool_use_id":"t3"},
			{"type":"text","text":"again"}]}],
		"tools":[{"name":"f","input_schema":{"type":"object"}}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
	`{"messages":[{"role":"user","content":"line\nbreak \u003cb\u003e \"q\" & \u2028 \u00e9"}],"model":"m","max_tokens":10,"stream":true}`,
	`{"model":"m","max_tokens":10,"system":"shadowed","system":[{"type":"text","text":"the last"}],"messages":[{"role":"user","content":"x"}]}`,
}

// maskFamily is what the tests read and write of one API family's parsed
// request.
type maskFamily[R any] struct {
	parse func([]byte) (R, error)
	texts func(R) []translate.RequestText
	mask  func(R, func(translate.RequestText) string) bool
	// members are the request's members, and the body it would send.
	members func(R) map[string]json.RawMessage
	body    func(R) []byte
	// consistent fails the test unless the request's body and offsets
	// agree with its members.
	consistent func(testing.TB, R)
}

var chatFamily = maskFamily[*api.ChatRequest]{
	parse:   api.ParseChatRequest,
	texts:   api.ChatTexts,
	mask:    api.MapChatTexts,
	members: func(r *api.ChatRequest) map[string]json.RawMessage { return r.Members },
	body:    func(r *api.ChatRequest) []byte { return r.Body },
	consistent: func(t testing.TB, r *api.ChatRequest) {
		t.Helper()
		if r.Body == nil {
			return
		}
		again, err := api.ParseChatRequest(r.Body)
		if err != nil {
			t.Fatalf("the edited body does not parse: %v", err)
		}
		sameMembers(t, again.Members, r.Members)
		if d := cmp.Diff(again.ModelAt, r.ModelAt); d != "" {
			t.Errorf("ModelAt (-parsed +edited):\n%s", d)
		}
		if d := cmp.Diff(again.OptionsAt, r.OptionsAt); d != "" {
			t.Errorf("OptionsAt (-parsed +edited):\n%s", d)
		}
	},
}

var messagesFamily = maskFamily[*api.MessagesRequest]{
	parse:   func(b []byte) (*api.MessagesRequest, error) { return api.ParseMessagesRequest(b, false) },
	texts:   api.MessagesTexts,
	mask:    api.MapMessagesTexts,
	members: func(r *api.MessagesRequest) map[string]json.RawMessage { return r.Members },
	body:    func(r *api.MessagesRequest) []byte { return r.Body },
	consistent: func(t testing.TB, r *api.MessagesRequest) {
		t.Helper()
		again, err := api.ParseMessagesRequest(r.Body, false)
		if err != nil {
			t.Fatalf("the edited body does not parse: %v", err)
		}
		sameMembers(t, again.Members, r.Members)
		if d := cmp.Diff(again.ModelAt, r.ModelAt); d != "" {
			t.Errorf("ModelAt (-parsed +edited):\n%s", d)
		}
	},
}

func sameMembers(t testing.TB, want, got map[string]json.RawMessage) {
	t.Helper()
	if !maps.EqualFunc(want, got, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		t.Errorf("members of the edited body %s differ from the request's %s", mustMarshal(want), mustMarshal(got))
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestMapChatTexts(t *testing.T) {
	for _, body := range chatBodies {
		checkMap(t, chatFamily, body)
	}
}

func TestMapMessagesTexts(t *testing.T) {
	for _, body := range messagesBodies {
		checkMap(t, messagesFamily, body)
	}
}

// checkMap checks a writer on body: f sees what the reader returns, in
// order; an f that changes nothing leaves the request byte for byte as
// it was; one that uppercases one part's text changes those strings and
// nothing else; text that needs escapes round-trips.
func checkMap[R any](t *testing.T, fam maskFamily[R], body string) {
	t.Helper()
	r := mustParse(t, fam, body)
	before := maps.Clone(fam.members(r))
	var seen []translate.RequestText
	if fam.mask(r, func(x translate.RequestText) string { seen = append(seen, x); return x.Text }) {
		t.Errorf("%.60s: an f that changes nothing changed the request", body)
	}
	want := fam.texts(r)
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("%.60s: f saw (-reader +f):\n%s", body, d)
	}
	sameMembers(t, before, fam.members(r))
	if !bytes.Equal(fam.body(r), []byte(body)) && fam.body(r) != nil {
		t.Errorf("%.60s: an f that changes nothing changed the body", body)
	}
	for _, part := range translate.Parts {
		checkUpper(t, fam, body, want, part)
	}
	checkEscapes(t, fam, body, want)
}

func mustParse[R any](t testing.TB, fam maskFamily[R], body string) R {
	t.Helper()
	r, err := fam.parse([]byte(body))
	if err != nil {
		t.Fatalf("%.60s: %v", body, err)
	}
	return r
}

// checkUpper uppercases the text of part in body, whose text is orig.
func checkUpper[R any](t *testing.T, fam maskFamily[R], body string, orig []translate.RequestText, part translate.Part) {
	t.Helper()
	r := mustParse(t, fam, body)
	upper := func(x translate.RequestText) string {
		if x.Part == part {
			return strings.ToUpper(x.Text)
		}
		return x.Text
	}
	var want []translate.RequestText
	changes := map[string]string{}
	for _, x := range orig {
		want = append(want, translate.RequestText{Part: x.Part, Text: upper(x)})
		if up := upper(x); up != x.Text {
			changes[x.Text] = up
		}
	}
	if got := fam.mask(r, upper); got != (len(changes) > 0) {
		t.Errorf("%.60s, %v uppercased: reported a change %v", body, part, got)
	}
	if d := cmp.Diff(want, fam.texts(r)); d != "" {
		t.Errorf("%.60s, %v uppercased (-want +got):\n%s", body, part, d)
	}
	orig2 := mustParse(t, fam, body)
	n := 0
	for k, v := range fam.members(orig2) {
		n += onlyChanged(t, decode(t, v), decode(t, fam.members(r)[k]), changes, k)
	}
	if wantN := changedPieces(orig, upper); n != wantN {
		t.Errorf("%.60s, %v uppercased: %d strings changed, want %d", body, part, n, wantN)
	}
	fam.consistent(t, r)
}

// changedPieces counts the pieces f changes.
func changedPieces(texts []translate.RequestText, f func(translate.RequestText) string) int {
	n := 0
	for _, x := range texts {
		if f(x) != x.Text {
			n++
		}
	}
	return n
}

func decode(t testing.TB, raw []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return v
}

// onlyChanged fails the test unless after is before but for strings
// changes maps to their new text, and returns how many strings changed.
func onlyChanged(t testing.TB, before, after any, changes map[string]string, path string) int {
	t.Helper()
	switch b := before.(type) {
	case map[string]any:
		a, ok := after.(map[string]any)
		if !ok || len(a) != len(b) {
			t.Errorf("%s: %v became %v", path, b, after)
			return 0
		}
		n := 0
		for k, v := range b {
			n += onlyChanged(t, v, a[k], changes, path+"."+k)
		}
		return n
	case []any:
		a, ok := after.([]any)
		if !ok || len(a) != len(b) {
			t.Errorf("%s: %v became %v", path, b, after)
			return 0
		}
		n := 0
		for i := range b {
			n += onlyChanged(t, b[i], a[i], changes, path+"[]")
		}
		return n
	case string:
		if after == b {
			return 0
		}
		if after != changes[b] {
			t.Errorf("%s: %q became %q", path, b, after)
		}
		return 1
	}
	if before != after {
		t.Errorf("%s: %v became %v", path, before, after)
	}
	return 0
}

// tricky is text that needs every kind of escape.
const tricky = "\"quoted\" \\ new\nline\ttab <b>&amp;</b> \u2028\u2029 \u00e9\u65e5\u672c\U0001F600 \x01"

// checkEscapes puts text that needs escapes in every piece and reads it
// back, quoted as encoding/json quotes it.
func checkEscapes[R any](t *testing.T, fam maskFamily[R], body string, orig []translate.RequestText) {
	t.Helper()
	r := mustParse(t, fam, body)
	f := func(x translate.RequestText) string { return tricky + x.Text }
	fam.mask(r, f)
	var want []translate.RequestText
	for _, x := range orig {
		want = append(want, translate.RequestText{Part: x.Part, Text: f(x)})
	}
	if d := cmp.Diff(want, fam.texts(r)); d != "" {
		t.Errorf("%.60s, escapes (-want +got):\n%s", body, d)
	}
	var all []byte // the members as they are, not compacted anew
	for _, v := range fam.members(r) {
		all = append(all, v...)
	}
	for _, x := range orig {
		quoted := mustMarshal(f(x))
		if !bytes.Contains(all, quoted) {
			t.Errorf("%.60s: no %s in the request", body, quoted)
		}
	}
	fam.consistent(t, r)
}

// secret is the text the upstream tests mask.
const secret = "my SSN is 123-45-6789"

// mask masks the secret in the user's text.
func mask(x translate.RequestText) string {
	if x.Part == translate.PartUser {
		return strings.ReplaceAll(x.Text, "123-45-6789", "[masked]")
	}
	return x.Text
}

// checkUpstream fails the test unless the upstream body carries the masked
// text and not the secret.
func checkUpstream(t *testing.T, name string, tr translate.Translator, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatalf("%s: RequestBody: %v", name, err)
	}
	if !json.Valid(up.Body) || bytes.Contains(up.Body, []byte("6789")) || !bytes.Contains(up.Body, []byte("my SSN is [masked]")) {
		t.Errorf("%s: upstream body %s", name, up.Body)
	}
}

// A translator built after the edit sends the masked text: the members it
// reads, and the body with its offsets a fast path edits (model after
// messages moves when the messages change).
func TestMapChatTextsUpstream(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"` + secret + `"}]}],"model":"client-model","stream":true,"stream_options":{"include_usage":false}}`,
		`{"model":"client-model","messages":[{"role":"user","content":"` + secret + `"}]}`,
	} {
		for _, name := range []string{"openai", "anthropic", "gemini"} {
			r := mustParse(t, chatFamily, body)
			if !api.MapChatTexts(r, mask) {
				t.Fatal("nothing masked")
			}
			p, _ := providers.Lookup(name)
			checkUpstream(t, name, p.Chat(translate.Target{Model: "m"}, r), nil)
		}
	}
}

func TestMapMessagesTextsUpstream(t *testing.T) {
	for _, body := range []string{
		`{"messages":[{"role":"user","content":[{"type":"text","text":"` + secret + `","cache_control":{"type":"ephemeral"}}]}],"model":"client-model","max_tokens":10}`,
		`{"model":"client-model","max_tokens":10,"system":"s","messages":[{"role":"user","content":"` + secret + `"}]}`,
	} {
		for _, name := range []string{"anthropic", "openai"} { // native, and bridged over chat
			r := mustParse(t, messagesFamily, body)
			if !api.MapMessagesTexts(r, mask) {
				t.Fatal("nothing masked")
			}
			p, _ := providers.Lookup(name)
			tr, err := p.MessagesTranslator(translate.Target{Model: "m"}, r)
			checkUpstream(t, name, tr, err)
		}
	}
}

// Any parsed request's text can be rewritten: the writers never panic,
// and what they write is what the readers read back.
func FuzzMapTexts(f *testing.F) {
	for _, b := range chatBodies {
		f.Add([]byte(b))
	}
	for _, b := range messagesBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if r, err := api.ParseChatRequest(body); err == nil {
			fuzzMap(t, chatFamily, r)
		}
		if r, err := api.ParseMessagesRequest(body, false); err == nil {
			fuzzMap(t, messagesFamily, r)
		}
	})
}

// fuzzMap appends "x" to every piece of r's text and reads it back.
func fuzzMap[R any](t *testing.T, fam maskFamily[R], r R) {
	orig := fam.texts(r)
	var want []translate.RequestText
	for _, x := range orig {
		want = append(want, translate.RequestText{Part: x.Part, Text: x.Text + "x"})
	}
	if changed := fam.mask(r, func(x translate.RequestText) string { return x.Text + "x" }); changed != (len(orig) > 0) {
		t.Errorf("reported a change %v of %d pieces", changed, len(orig))
	}
	if d := cmp.Diff(want, fam.texts(r)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	fam.consistent(t, r)
}
