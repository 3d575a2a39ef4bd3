// Package redacttest holds what the tests of credential redaction share:
// a sample of every credential format package redact hides, with random
// bodies, for its own tests and for the tests of the captures and errors
// that use it.
package redacttest

import (
	"encoding/base64"
	"encoding/hex"
	"math/rand/v2"
	"slices"

	"modelgate/authz"
)

// Sample builds a credential of one documented shape with a random body
// (never a real key): text is how it is written, secret the part that
// must never be kept.
type Sample struct {
	Name string
	Make func(r *rand.Rand) (text, secret string)
}

const (
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b64url   = alnum + "_-"
	b64std   = alnum + "+/"
	upperNum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0234567"
	hexLower = "0123456789abcdef"
	letters  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	digits   = "0123456789"
)

func randFrom(r *rand.Rand, set string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = set[r.IntN(len(set))]
	}
	return string(b)
}

// bare is a sample whose text is the secret.
func bare(name string, f func(r *rand.Rand) string) Sample {
	return Sample{name, func(r *rand.Rand) (string, string) { s := f(r); return s, s }}
}

func prefixed(name, prefix, set string, n int) Sample {
	return bare(name, func(r *rand.Rand) string { return prefix + randFrom(r, set, n) })
}

func b64(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// samples: at least one per entry of redact's secretFormats, each from
// the shape its comment there cites.
var samples = []Sample{
	bare("OpenAI legacy sk-", func(r *rand.Rand) string {
		return "sk-" + randFrom(r, alnum, 20) + "T3BlbkFJ" + randFrom(r, alnum, 20)
	}),
	prefixed("OpenAI project sk-proj-", "sk-proj-", b64url, 156),
	prefixed("OpenAI service account sk-svcacct-", "sk-svcacct-", b64url, 156),
	prefixed("OpenAI admin sk-admin-", "sk-admin-", b64url, 120),
	prefixed("DeepSeek sk- + 32 hex", "sk-", hexLower, 32),
	bare("Anthropic sk-ant-api03-", func(r *rand.Rand) string { return "sk-ant-api03-" + randFrom(r, b64url, 93) + "AA" }),
	bare("modelgate generated key", func(*rand.Rand) string { k, _ := authz.GenerateKey(); return k }),
	prefixed("modelgate KeyPrefix", authz.KeyPrefix, b64url, 43),
	prefixed("Groq gsk_", "gsk_", alnum, 52),
	prefixed("xAI xai-", "xai-", alnum, 80),
	prefixed("GitHub ghp_", "ghp_", alnum, 36),
	prefixed("GitHub gho_", "gho_", alnum, 36),
	prefixed("GitHub ghu_", "ghu_", alnum, 36),
	prefixed("GitHub ghs_", "ghs_", alnum, 36),
	prefixed("GitHub ghr_", "ghr_", alnum, 36),
	bare("GitHub github_pat_", func(r *rand.Rand) string {
		return "github_pat_" + randFrom(r, alnum, 22) + "_" + randFrom(r, alnum, 59)
	}),
	prefixed("Hugging Face hf_", "hf_", letters, 34),
	prefixed("Hugging Face api_org_", "api_org_", letters, 34),
	bare("Slack xoxb-", func(r *rand.Rand) string {
		return "xoxb-" + randFrom(r, digits, 11) + "-" + randFrom(r, digits, 13) + "-" + randFrom(r, alnum, 24)
	}),
	bare("Slack xoxp-", func(r *rand.Rand) string {
		return "xoxp-" + randFrom(r, digits, 11) + "-" + randFrom(r, digits, 11) + "-" + randFrom(r, digits, 13) + "-" + randFrom(r, hexLower, 32)
	}),
	bare("Slack xapp-", func(r *rand.Rand) string {
		return "xapp-1-" + randFrom(r, upperNum, 11) + "-" + randFrom(r, digits, 13) + "-" + randFrom(r, hexLower, 64)
	}),
	prefixed("Stripe sk_live_", "sk_live_", alnum, 99),
	prefixed("Stripe rk_live_", "rk_live_", alnum, 24),
	prefixed("Stripe sk_test_", "sk_test_", alnum, 24),
	prefixed("Stripe whsec_", "whsec_", alnum, 32),
	prefixed("Google AIza", "AIza", b64url, 35),
	prefixed("Google ya29.", "ya29.", b64url, 150),
	prefixed("AWS AKIA", "AKIA", upperNum, 16),
	prefixed("AWS ASIA", "ASIA", upperNum, 16),
	prefixed("AWS session token", "IQoJb3JpZ2luX2VjE", b64std, 300),
	{"AWS secret access key", func(r *rand.Rand) (string, string) {
		s := randFrom(r, b64std, 40)
		return "aws_secret_access_key = " + s, s
	}},
	{"AWS SecretAccessKey (JSON)", func(r *rand.Rand) (string, string) {
		s := randFrom(r, b64std, 40)
		return `"SecretAccessKey": "` + s + `"`, s
	}},
	bare("JWT", func(r *rand.Rand) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
		c := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + randFrom(r, alnum, 12) + `","iat":1516239022}`))
		return h + "." + c + "." + b64(r, 32)
	}),
	prefixed("GitLab glpat-", "glpat-", b64url, 20),
	prefixed("GitLab glptt-", "glptt-", hexLower, 40),
	prefixed("npm npm_", "npm_", alnum, 36),
	prefixed("PyPI pypi-", "pypi-AgEIcHlwaS5vcmc", b64url, 120),
	prefixed("Twilio SK", "SK", hexLower, 32),
	bare("SendGrid SG.", func(r *rand.Rand) string { return "SG." + randFrom(r, b64url, 22) + "." + randFrom(r, b64url, 43) }),
	prefixed("Perplexity pplx-", "pplx-", alnum, 48),
	prefixed("Replicate r8_", "r8_", alnum, 37),
	prefixed("DigitalOcean dop_v1_", "dop_v1_", hexLower, 64),
	prefixed("Databricks dapi", "dapi", hexLower, 32),
	{"Azure OpenAI api-key (32 hex)", func(r *rand.Rand) (string, string) {
		s := hex.EncodeToString([]byte(randFrom(r, alnum, 16)))
		return "api-key: " + s, s
	}},
	{"Mistral key after a label", func(r *rand.Rand) (string, string) {
		s := randFrom(r, alnum, 32)
		return "MISTRAL_API_KEY=" + s, s
	}},
	{"bearer token", func(r *rand.Rand) (string, string) {
		s := randFrom(r, alnum, 40)
		return "Authorization: Bearer " + s, s
	}},
	{"PEM private key", func(r *rand.Rand) (string, string) {
		body := randFrom(r, b64std, 64) + "\n" + randFrom(r, b64std, 64)
		return "-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----", body
	}},
	{"PEM private key, cut", func(r *rand.Rand) (string, string) {
		body := randFrom(r, b64std, 64)
		return "-----BEGIN OPENSSH PRIVATE KEY-----\n" + body, body
	}},
}

// Samples returns the samples: at least one per credential format package
// redact lists, each of the shape the list's comment cites.
func Samples() []Sample { return slices.Clone(samples) }

// Credential is a credential of a documented shape with a random body:
// Text as written, Secret the part a capture must never keep.
type Credential struct {
	Name         string
	Text, Secret string
}

// Credentials returns one credential of every sample's shape.
func Credentials(r *rand.Rand) []Credential {
	out := make([]Credential, len(samples))
	for i, s := range samples {
		text, secret := s.Make(r)
		out[i] = Credential{s.Name, text, secret}
	}
	return out
}
