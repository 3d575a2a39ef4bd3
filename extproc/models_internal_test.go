package extproc

import (
	"testing"

	"modelgate/envoy/routing"
)

// A name resolves to the model of that id, else the model with that exact
// alias, else the model with the longest prefix alias it starts with.
func TestAliasResolution(t *testing.T) {
	deploy := []routing.Deployment{{Backend: "b", Model: "m"}}
	r, err := newRouter(routing.Table{Backends: []routing.Backend{{Name: "b", Provider: "openai"}}, Models: []routing.Model{
		{ID: "claude-sonnet-4-5", Deployments: deploy, Aliases: []string{"claude-*"}},
		{ID: "sonnet", Deployments: deploy, Aliases: []string{"claude-sonnet-*", "claude-haiku-4-5", "claude-sonnet-4-5"}},
		{ID: "gpt", Deployments: deploy, Aliases: []string{"gpt-5-codex*"}},
	}}, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{ // the model, and the configured name that matched
		"claude-sonnet-4-5":          {"claude-sonnet-4-5", "claude-sonnet-4-5"}, // an id wins over an exact alias
		"claude-haiku-4-5":           {"sonnet", "claude-haiku-4-5"},             // an exact alias over a prefix
		"claude-sonnet-4-5-20250929": {"sonnet", "claude-sonnet-*"},              // the longest prefix
		"claude-opus-4-1":            {"claude-sonnet-4-5", "claude-*"},          // a shorter one
		"gpt-5-codex":                {"gpt", "gpt-5-codex*"},
		"gpt-5-codex-mini":           {"gpt", "gpt-5-codex*"},
		"sonnet":                     {"sonnet", "sonnet"},
		"gpt-5":                      {},
		"":                           {},
	} {
		var got [2]string
		if m, as := r.resolve(name); m != nil {
			got = [2]string{m.ID, as}
		}
		if got != want {
			t.Errorf("%q resolves to %q, want %q", name, got, want)
		}
	}
	if _, err := newRouter(routing.Table{Backends: []routing.Backend{{Name: "b", Provider: "openai"}}, Models: []routing.Model{
		{ID: "a", Deployments: deploy, Aliases: []string{"x-*"}}, {ID: "b", Deployments: deploy, Aliases: []string{"x-*"}},
	}}, nil, 1); err == nil {
		t.Error("two models claiming one prefix: no error")
	}
}
