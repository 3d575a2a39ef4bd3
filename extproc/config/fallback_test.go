package config

import (
	"os"
	"strings"
	"testing"
)

// withFallback is a config of a model with fallback
// (testdata/fallback.yaml, which cmd/modelgate/wiring's test reads too).
var withFallback = mustRead("testdata/fallback.yaml")

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestFallbackConfigProblems(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{strings.Replace(withFallback, "[connect-failure, 429]", "[connect-failure, 503]", 1), `models[0].fallback.retry_on[1]: "503" is not one of`},
		{strings.Replace(withFallback, "{retries: 3,", "{retries: 11,", 1), "fallback.retries: must be 0 to 10"},
		{strings.Replace(withFallback, "model: gpt-4o-mini}]", "model: gpt-4o-mini, priority: 1}]", 1), "models[1].deployments[0].priority: applies to a model with fallback"},
		{strings.Replace(withFallback, "backend: claude, model: claude-sonnet-4", "backend: openai, model: claude-sonnet-4", 1), "serves the model twice"},
		{strings.Replace(withFallback, "outlier: {consecutive: 2}", "outlier: {consecutiv: 2}", 1), `models[0].fallback.outlier.consecutiv: unknown key; did you mean "consecutive"`},
		{strings.Replace(withFallback, "max_retry_after: 20s", "max_retry_after: 20", 1), "fallback.max_retry_after"},
	} {
		_, err := Parse([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
