package guard_test

import (
	"context"
	"regexp"
	"testing"

	"modelgate/extproc/guard"
	"modelgate/translate"
)

// Request rules run in order on the parts they read; the first that
// blocks ends the check, monitors go on. A conversation rule reads each
// part's text joined, so a match split across messages is found; any
// other rule reads each message alone.
func TestCheck(t *testing.T) {
	forbidden := []*regexp.Regexp{regexp.MustCompile(`forbidden-word`)}
	rule := func(name string, a guard.Action, conversation bool, parts ...translate.Part) *guard.Rule {
		return &guard.Rule{Name: name, Action: a, Patterns: forbidden, Parts: parts, Conversation: conversation}
	}
	split := []translate.RequestText{{Part: translate.PartUser, Text: "say forbidden-"}, {Part: translate.PartSystem, Text: "x"},
		{Part: translate.PartUser, Text: "word please"}}
	whole := []translate.RequestText{{Part: translate.PartSystem, Text: "forbidden-word"}, {Part: translate.PartUser, Text: "hi"}}
	for _, tt := range []struct {
		name    string
		rules   []*guard.Rule
		texts   []translate.RequestText
		want    []guard.Result
		blocked string
	}{
		{"split, per message", []*guard.Rule{rule("a", guard.Block, false, translate.PartUser)}, split, []guard.Result{guard.Allowed}, ""},
		{"split, conversation", []*guard.Rule{rule("a", guard.Block, true, translate.PartUser)}, split, []guard.Result{guard.Blocked}, "a"},
		{"split across parts", []*guard.Rule{rule("a", guard.Block, true, translate.PartUser, translate.PartSystem)}, []translate.RequestText{
			{Part: translate.PartUser, Text: "forbidden-"}, {Part: translate.PartSystem, Text: "word"}}, []guard.Result{guard.Allowed}, ""},
		{"a part not read", []*guard.Rule{rule("a", guard.Block, false, translate.PartUser)}, whole, []guard.Result{guard.Allowed}, ""},
		{"monitor, then block, then nothing", []*guard.Rule{rule("m", guard.Monitor, false, translate.PartSystem), rule("b", guard.Block, false, translate.PartSystem),
			rule("c", guard.Block, false, translate.PartSystem)}, whole, []guard.Result{guard.Monitored, guard.Blocked}, "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := guard.Check(context.Background(), tt.rules, tt.texts, nil, guard.NewMasker([]byte("k"), "a"))
			outcomes, blocked := c.Outcomes, c.Blocked
			var got []guard.Result
			for _, o := range outcomes {
				got = append(got, o.Result)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("outcomes %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("outcomes %v, want %v", got, tt.want)
				}
			}
			if name := ""; blocked != nil && blocked.Name != tt.blocked || blocked == nil && tt.blocked != name {
				t.Errorf("blocked by %v, want %q", blocked, tt.blocked)
			}
		})
	}
}

// Optional rules run only where a key, account or group names them, a
// rule with models on those models only; the others always.
func TestFor(t *testing.T) {
	a, b, c := &guard.Rule{Name: "a"}, &guard.Rule{Name: "b", Optional: true}, &guard.Rule{Name: "c", Optional: true}
	m := &guard.Rule{Name: "m", Models: []string{"gpt"}}
	rules := []*guard.Rule{a, b, c, m}
	if got := guard.For(rules, "claude", nil); len(got) != 1 || got[0] != a {
		t.Errorf("none named: %v", got)
	}
	if got := guard.For(rules, "gpt", []string{"c", "unknown"}); len(got) != 3 || got[0] != a || got[1] != c || got[2] != m {
		t.Errorf("c named, on gpt: %v", got)
	}
	if got := guard.For([]*guard.Rule{a}, "gpt", []string{"b"}); len(got) != 1 {
		t.Errorf("no scoped rule: %v", got)
	}
}
