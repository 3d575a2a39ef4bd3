package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestLiftBase64(t *testing.T) {
	img := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0, 1, 2, 0xff}, 600))
	img2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 2000))
	words := strings.Repeat("not base64 ", 200)
	body := []byte(`{"p":"say \"hi\" \\","data":[{"b64_json":"` + img + `","revised_prompt":"` + words + `"},{"b64_json":"QUJD"}],` +
		`"escaped":"` + strings.Replace(img, "/", `\/`, 1) + `","more":["` + img2 + `"]}`)
	small, l := LiftBase64(body)
	if len(small) > len(body)-len(img)-len(img2)+100 {
		t.Errorf("lifted body is %d bytes of %d", len(small), len(body))
	}
	var v struct {
		P    string
		Data []struct {
			B64JSON       string `json:"b64_json"`
			RevisedPrompt string `json:"revised_prompt"`
		}
		Escaped string
		More    []string
	}
	if err := json.Unmarshal(small, &v); err != nil {
		t.Fatalf("%v: %s", err, small)
	}
	d := v.Data
	if got := l.Value(d[0].B64JSON); string(got) != img {
		t.Errorf("first image came back as %.40q", got)
	}
	if got := l.Value(v.More[0]); string(got) != img2 {
		t.Errorf("second image came back as %.40q", got)
	}
	if string(l.Value(d[1].B64JSON)) != "QUJD" || d[0].RevisedPrompt != words || v.P != `say "hi" \` {
		t.Errorf("short and non-base64 strings must stay: %+v %q", d, v.P)
	}
	if !strings.Contains(v.Escaped, "/") || strings.HasPrefix(v.Escaped, "\x00") {
		t.Errorf("a string with escapes is decoded, not lifted")
	}
	if !bytes.Equal(l.Restore(small), body) {
		t.Errorf("Restore does not give the body back")
	}
	// Re-encoded by encoding/json, the placeholders are restored as well.
	var anyV any
	json.Unmarshal(small, &anyV)
	again, _ := json.Marshal(anyV)
	var want, got any
	json.Unmarshal(body, &want)
	json.Unmarshal(l.Restore(again), &got)
	if !jsonEqual(want, got) {
		t.Errorf("re-encoded body restores to something else")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func FuzzLiftBase64(f *testing.F) {
	img := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1, 2, 3}, 400))
	f.Add([]byte(`{"data":[{"b64_json":"` + img + `"}],"x":"\\\""}`))
	f.Add([]byte(`["` + img + `","` + img + `"]`))
	f.Add([]byte(`{"a":"\"` + img + `"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.Contains(body, []byte(placeholderPrefix)) {
			t.Skip("the body already holds a placeholder")
		}
		small, l := LiftBase64(body)
		if !bytes.Equal(l.Restore(small), body) {
			t.Fatalf("Restore(LiftBase64(%q)) differs", body)
		}
		if json.Valid(small) != json.Valid(body) {
			t.Fatalf("lifting changed validity of %q", body)
		}
	})
}
