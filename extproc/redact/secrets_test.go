package redact

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"modelgate/extproc/redact/redacttest"
)

// Every format of the list is exercised by a sample of its documented
// shape, and every sample is hidden whole, wherever it stands in text.
func TestSecretFormats(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	samples := redacttest.Samples()
	if len(samples) < 20 {
		t.Fatalf("%d samples", len(samples))
	}
	for _, f := range secretFormats {
		re := regexp.MustCompile(f.pattern)
		matched := false
		for _, s := range samples {
			text, _ := s.Make(r)
			matched = matched || re.MatchString(text)
		}
		if !matched {
			t.Errorf("%s %s: no sample of its shape", f.vendor, f.name)
		}
	}
	red := Rules{}
	for _, s := range samples {
		for range 20 {
			text, secret := s.Make(r)
			for _, around := range [][2]string{{"", ""}, {"my key is ", ", keep it"}, {"x", "y"}, {"\n", "\t"}, {`"`, `"`}} {
				in := around[0] + text + around[1]
				if out := red.text(in); strings.Contains(out, secret) {
					t.Errorf("%s: %q kept in %q", s.Name, secret, out)
				}
			}
		}
	}
}

// Ordinary prose and chat answers are not taken for keys.
func TestSecretFormatsSpareProse(t *testing.T) {
	for _, s := range []string{
		"Hello! How can I help you today?",
		"The task-oriented sk-learn pipeline", // short after sk-
		"Use the token count to budget: max_tokens is 1024.",
		"chatcmpl-abc123 gpt-4o-mini-2024-07-18",
		`{"id":"resp_67ccd2bed1ec8190b14f964abc054267","object":"response"}`,
	} {
		if out := (Rules{}).Apply([]byte(s), false); out != s {
			t.Errorf("%q became %q", s, out)
		}
	}
}
