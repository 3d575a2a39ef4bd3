package api

import (
	"math"
	"testing"
)

// A Messages request allows as many web searches as its web search tools'
// max_uses; a web search tool without one, other tools and tools of the
// wrong shape add none, and the sum saturates.
func TestWebSearchMaxUses(t *testing.T) {
	for tools, want := range map[string]int64{
		`[{"type":"web_search_20250305","name":"web_search","max_uses":5}]`:                                                                 5,
		`[{"type":"web_search_20250305","name":"web_search"}]`:                                                                              0,
		`[{"type":"web_search_20260209","name":"web_search","max_uses":2},{"name":"f","input_schema":{}}]`:                                  2,
		`[{"type":"web_search_20250305","name":"a","max_uses":2},{"type":"web_search_20250305","name":"b","max_uses":3}]`:                   5,
		`[{"type":"web_fetch_20250910","name":"web_fetch","max_uses":4}]`:                                                                   0,
		`[{"type":"web_search_20250305","name":"web_search","max_uses":"5"},7]`:                                                             0,
		`[{"type":"web_search_20250305","name":"web_search","max_uses":-1}]`:                                                                0,
		`[{"type":"web_search_20250305","name":"a","max_uses":9223372036854775807},{"type":"web_search_20250305","name":"b","max_uses":9}]`: math.MaxInt64,
		`{"type":"web_search_20250305"}`:                                                                                                    0,
		`null`:                                                                                                                              0,
	} {
		r, err := ParseMessagesRequest([]byte(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}],"tools":`+tools+`}`), false)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.WebSearchMaxUses(); got != want {
			t.Errorf("tools %s: %d web searches, want %d", tools, got, want)
		}
	}
}
