package config

import (
	"strings"
	"testing"
)

const withFallback = `
backends:
  - {name: openai, provider: openai, base_url: https://api.openai.com, api_key_env: K, timeouts: {response_headers: 40s}}
  - {name: claude, provider: anthropic, base_url: https://api.anthropic.com, api_key_env: K}
models:
  - id: gpt-4o
    deployments:
      - {backend: openai, model: gpt-4o}
      - {backend: claude, model: claude-sonnet-4, priority: 1, weight: 2}
    fallback: {retry_on: [connect-failure, 429], outlier: {consecutive: 2}}
  - id: plain
    deployments: [{backend: openai, model: gpt-4o-mini}]
fallback: {retries: 3, max_retry_after: 20s, outlier: {base_ejection: 10s}}
`

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
