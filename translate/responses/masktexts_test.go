package responses_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/providers"
	"modelgate/translate/responses"
)

// maskBodies are Responses requests of many shapes: string input,
// instructions, messages with input_text, output_text and images,
// function_call_output with string and array outputs, reasoning items
// and function calls (which are not text), escapes, keys folded as
// encoding/json reads them.
var maskBodies = []string{
	`{"model":"m","instructions":"be brief","input":"hello"}`,
	`{"model":"m","instructions":"be brief","input":[
		{"role":"developer","content":"rules"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"data:image/png;base64,AAAA","detail":"low"}]},
		{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"look"}],"encrypted_content":"xyz"},
		{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"q\":\"look\"}"},
		{"type":"function_call_output","call_id":"c1","output":"result"},
		{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"earlier answer","annotations":[{"type":"url_citation","url":"https://x"}]}]},
		{"type":"custom_tool_call_output","call_id":"c2","output":[{"type":"input_text","text":"patched"},{"type":"input_image","image_url":"https://x/y.png"}]},
		{"type":"function_call_output","call_id":"c3","output":[{"type":"output_text","text":"array output"}]},
		{"type":"item_reference","id":"msg_0"},
		{"role":"system","content":[{"type":"input_text","text":"system rules"}]}],
	 "tools":[{"type":"function","name":"f","parameters":{}}],"x_vendor":{"k":[1,2.50]}}`,
	"{\"model\":\"m\",\"instructions\":\"line\\nbreak \\u003c & \u2028\",\"input\":[{\"role\":\"user\",\"content\":\"quote \\\" \\u00e9 \u65e5\u672c \\ud83d\\ude00\"}]}",
	`{"model":"m","instructions":[{"type":"input_text","text":"not read"}],"input":[null,1,"x",{},
		{"role":"user","content":"shadowed","CONTENT":[{"type":"input_text","text":"folded","Text":null}]},
		{"type":"function_call_output","Output":"folded output"}]}`,
}

func TestMapTexts(t *testing.T) {
	for _, body := range maskBodies {
		r := parseMasked(t, body)
		var seen []translate.RequestText
		if responses.MapTexts(r, func(x translate.RequestText) string { seen = append(seen, x); return x.Text }) {
			t.Errorf("%.60s: an f that changes nothing changed the request", body)
		}
		want := responses.Texts(r)
		if d := cmp.Diff(want, seen); d != "" {
			t.Errorf("%.60s: f saw (-reader +f):\n%s", body, d)
		}
		sameMaskMembers(t, parseMasked(t, body).Members, r.Members)
		for _, part := range translate.Parts {
			checkMaskUpper(t, body, want, part)
		}
		checkMaskEscapes(t, body, want)
	}
}

// The items of a stored conversation are rewritten in place, as
// ItemTexts reads them.
func TestMapItemTexts(t *testing.T) {
	var items []json.RawMessage
	if err := json.Unmarshal(parseMasked(t, maskBodies[1]).Members["input"], &items); err != nil {
		t.Fatal(err)
	}
	orig := responses.ItemTexts(items)
	var seen []translate.RequestText
	if responses.MapItemTexts(items, func(x translate.RequestText) string { seen = append(seen, x); return strings.ToUpper(x.Text) }) != true {
		t.Error("no change reported")
	}
	if d := cmp.Diff(orig, seen); d != "" {
		t.Errorf("f saw (-reader +f):\n%s", d)
	}
	for i := range orig {
		orig[i].Text = strings.ToUpper(orig[i].Text)
	}
	if d := cmp.Diff(orig, responses.ItemTexts(items)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func parseMasked(t testing.TB, body string) *responses.Request {
	t.Helper()
	r, err := responses.ParseRequest([]byte(body))
	if err != nil {
		t.Fatalf("%.60s: %v", body, err)
	}
	return r
}

func sameMaskMembers(t testing.TB, want, got map[string]json.RawMessage) {
	t.Helper()
	if !maps.EqualFunc(want, got, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
		t.Errorf("the members changed: %v, want %v", got, want)
	}
}

// checkUpper uppercases the text of part in body, whose text is orig: the
// strings of those pieces change, nothing else does.
func checkMaskUpper(t *testing.T, body string, orig []translate.RequestText, part translate.Part) {
	t.Helper()
	upper := func(x translate.RequestText) string {
		if x.Part == part {
			return strings.ToUpper(x.Text)
		}
		return x.Text
	}
	var want []translate.RequestText
	changes, n := map[string]string{}, 0
	for _, x := range orig {
		want = append(want, translate.RequestText{Part: x.Part, Text: upper(x)})
		if up := upper(x); up != x.Text {
			changes[x.Text], n = up, n+1
		}
	}
	r := parseMasked(t, body)
	if got := responses.MapTexts(r, upper); got != (n > 0) {
		t.Errorf("%.60s, %v uppercased: reported a change %v", body, part, got)
	}
	if d := cmp.Diff(want, responses.Texts(r)); d != "" {
		t.Errorf("%.60s, %v uppercased (-want +got):\n%s", body, part, d)
	}
	changed := 0
	for k, v := range parseMasked(t, body).Members {
		changed += onlyChangedStrings(t, decodeAny(t, v), decodeAny(t, r.Members[k]), changes, k)
	}
	if changed != n {
		t.Errorf("%.60s, %v uppercased: %d strings changed, want %d", body, part, changed, n)
	}
}

func decodeAny(t testing.TB, raw []byte) any {
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
func onlyChangedStrings(t testing.TB, before, after any, changes map[string]string, path string) int {
	t.Helper()
	n := 0
	switch b := before.(type) {
	case map[string]any:
		a, ok := after.(map[string]any)
		if !ok || len(a) != len(b) {
			t.Errorf("%s: %v became %v", path, b, after)
		}
		for k, v := range b {
			n += onlyChangedStrings(t, v, a[k], changes, path+"."+k)
		}
	case []any:
		a, ok := after.([]any)
		if !ok || len(a) != len(b) {
			t.Errorf("%s: %v became %v", path, b, after)
			return 0
		}
		for i := range b {
			n += onlyChangedStrings(t, b[i], a[i], changes, path+"[]")
		}
	case string:
		if after == b {
			return 0
		}
		if after != changes[b] {
			t.Errorf("%s: %q became %q", path, b, after)
		}
		return 1
	default:
		if before != after {
			t.Errorf("%s: %v became %v", path, before, after)
		}
	}
	return n
}

// maskTricky is text that needs every kind of escape.
const maskTricky = "\"quoted\" \\ new\nline\ttab <b>&amp;</b> \u2028\u2029 \u00e9\u65e5\u672c\U0001F600 \x01"

// checkEscapes puts text that needs escapes in every piece and reads it
// back, quoted as encoding/json quotes it.
func checkMaskEscapes(t *testing.T, body string, orig []translate.RequestText) {
	t.Helper()
	r := parseMasked(t, body)
	f := func(x translate.RequestText) string { return maskTricky + x.Text }
	responses.MapTexts(r, f)
	var want []translate.RequestText
	for _, x := range orig {
		want = append(want, translate.RequestText{Part: x.Part, Text: f(x)})
	}
	if d := cmp.Diff(want, responses.Texts(r)); d != "" {
		t.Errorf("%.60s, escapes (-want +got):\n%s", body, d)
	}
	all := append(append([]byte(nil), r.Members["instructions"]...), r.Members["input"]...)
	for _, x := range orig {
		quoted, _ := json.Marshal(f(x))
		if !bytes.Contains(all, quoted) {
			t.Errorf("%.60s: no %s in the request", body, quoted)
		}
	}
}

// A translator built after the edit sends the masked text: the native
// one (OpenAI's passthrough) and one over chat (Anthropic's).
func TestMapTextsUpstream(t *testing.T) {
	const secret = "my SSN is 123-45-6789"
	for _, body := range []string{
		`{"model":"client-model","instructions":"be brief","input":"` + secret + `"}`,
		`{"model":"client-model","input":[{"role":"user","content":[{"type":"input_text","text":"` + secret + `"}]},
			{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"` + secret + `"}]}`,
	} {
		for _, name := range []string{"openai", "anthropic"} {
			r := parseMasked(t, body)
			if !responses.MapTexts(r, func(x translate.RequestText) string { return strings.ReplaceAll(x.Text, "123-45-6789", "[masked]") }) {
				t.Fatal("nothing masked")
			}
			p, _ := providers.Lookup(name)
			tr, err := p.ResponsesTranslator(translate.Target{Model: "m"}, r, nil, "resp_1", 1)
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
	}
}

// Any parsed request's text can be rewritten: MapTexts never panics, and
// what it writes is what Texts reads back.
func FuzzMapTexts(f *testing.F) {
	for _, b := range maskBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := responses.ParseRequest(body)
		if err != nil {
			return
		}
		orig := responses.Texts(r)
		for i := range orig {
			orig[i].Text += "x"
		}
		if changed := responses.MapTexts(r, func(x translate.RequestText) string { return x.Text + "x" }); changed != (len(orig) > 0) {
			t.Errorf("reported a change %v of %d pieces", changed, len(orig))
		}
		if d := cmp.Diff(orig, responses.Texts(r)); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}
