package redact

import (
	"regexp"
	"strings"

	"modelgate/authz"
)

// The credential formats payload capture always hides. Each entry names
// its vendor and the documented shape it follows; the pattern is kept a
// little looser than the shape (shorter minimum lengths, open-ended
// bodies) so that a format's next revision is still caught: hiding a
// string that only looks like a key costs a capture nothing.
//
// Patterns carry no leading word boundary where the prefix is distinctive
// enough (a key glued to a word is still a key); a format whose value
// alone is not distinctive (AWS secret keys, Azure's 32 hex digits,
// Mistral's and Cohere's opaque keys) is hidden only after a key-like
// label, and then only its value (the pattern's one capturing group).
//
// Still not caught, by design or for want of a documented shape:
//   - opaque keys without a prefix and without a label before them
//     (Mistral, Cohere, Azure OpenAI, Twilio auth tokens, AWS secret keys
//     written bare): they cannot be told from other random strings;
//   - a key spelled out or transformed (spaced, reversed, base64- or
//     URL-encoded, escaped twice inside a JSON string in a JSON string);
//   - a key split across different members or different messages of a
//     request (a stream's pieces of one member are joined, see redact.go),
//     or across the events of a body that does not start as an event
//     stream (it is redacted as text: each piece must be found alone);
//   - the part of a key a stream sent before it was cut, when that part is
//     shorter than its format's minimum;
//   - Google service account JSON other than its private key block, OAuth
//     refresh tokens, and every format not listed here.
type secretFormat struct {
	vendor, name string
	// pattern is a regular expression; a capturing group, if any, is the
	// part hidden.
	pattern string
}

var secretFormats = []secretFormat{
	// OpenAI: "sk-" then the key; project keys "sk-proj-", service
	// account keys "sk-svcacct-", admin keys "sk-admin-" (platform.openai.com
	// API keys page; gitleaks openai-api-key). DeepSeek ("sk-" + 32 hex) and
	// OpenRouter ("sk-or-v1-" + 64 hex) share the prefix.
	{"OpenAI", "API key (sk-, sk-proj-, sk-svcacct-, sk-admin-)", `sk-[A-Za-z0-9_-]{16,}`},
	// Anthropic: "sk-ant-api03-" (and "sk-ant-admin01-") + 93 characters
	// of [A-Za-z0-9_-] + "AA" (gitleaks anthropic-api-key); caught by the
	// sk- entry too, listed for the record.
	{"Anthropic", "API key (sk-ant-)", `sk-ant-[a-z0-9]+-[A-Za-z0-9_-]{20,}`},
	// modelgate: authz.KeyPrefix + 43 characters of base64url (authz.GenerateKey).
	{"modelgate", "gateway API key", regexp.QuoteMeta(authz.KeyPrefix) + `[A-Za-z0-9_-]{16,}`},
	// Groq: "gsk_" + 52 alphanumerics (console.groq.com keys; gitleaks groq).
	{"Groq", "API key (gsk_)", `gsk_[A-Za-z0-9]{20,}`},
	// xAI: "xai-" + 80 alphanumerics (console.x.ai; gitleaks xai-api-key).
	{"xAI", "API key (xai-)", `xai-[A-Za-z0-9]{20,}`},
	// GitHub: "ghp_", "gho_", "ghu_", "ghs_", "ghr_" + 36 alphanumerics;
	// fine-grained "github_pat_" + 82 of [A-Za-z0-9_] (GitHub docs, "About
	// authentication to GitHub", token formats; secret scanning patterns).
	{"GitHub", "token (ghp_, gho_, ghu_, ghs_, ghr_)", `gh[pousr]_[A-Za-z0-9]{30,}`},
	{"GitHub", "fine-grained personal access token (github_pat_)", `github_pat_[A-Za-z0-9_]{30,}`},
	// Hugging Face: "hf_" + 34 letters (huggingface.co/docs/hub/security-tokens;
	// gitleaks huggingface-access-token); "api_org_" + 34 for org tokens.
	{"Hugging Face", "user access token (hf_)", `hf_[A-Za-z0-9]{30,}`},
	{"Hugging Face", "organization token (api_org_)", `api_org_[A-Za-z0-9]{30,}`},
	// Slack: "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxo-", "xoxe-"
	// then dash-separated digits and alphanumerics; app-level "xapp-"
	// (api.slack.com/authentication/token-types).
	{"Slack", "token (xox[abeoprs]-, xapp-)", `(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}`},
	// Stripe: secret "sk_live_"/"sk_test_", restricted "rk_live_"/"rk_test_"
	// + 24 to 99 alphanumerics; webhook secrets "whsec_" (stripe.com/docs/keys).
	{"Stripe", "secret or restricted key (sk_live_, rk_live_, sk_test_, rk_test_)", `[rs]k_(?:live|test)_[A-Za-z0-9]{16,}`},
	{"Stripe", "webhook signing secret (whsec_)", `whsec_[A-Za-z0-9+/=]{24,}`},
	// Google: API keys "AIza" + 35 of [0-9A-Za-z_-] (cloud.google.com/docs/
	// authentication/api-keys); OAuth access tokens "ya29." (developers.google.com
	// identity; what Vertex AI backends are sent).
	{"Google", "API key (AIza)", `AIza[0-9A-Za-z_-]{30,}`},
	{"Google", "OAuth access token (ya29.)", `ya29\.[0-9A-Za-z_-]{20,}`},
	// AWS: access key ids, long-term "AKIA" and temporary "ASIA" (also
	// "ABIA", "ACCA") + 16 of [A-Z0-9] (IAM user guide, "Understanding
	// unique ID prefixes"); session tokens start "FwoGZXIvYXdz" or
	// "IQoJb3JpZ2lu" (base64 of their binary header).
	{"AWS", "access key id (AKIA, ASIA)", `(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}`},
	{"AWS", "session token", `(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9/+=]{40,}`},
	// AWS secret access keys: 40 characters of base64, only after a label
	// (aws_secret_access_key = …, "SecretAccessKey": …) as in the shared
	// credentials file and the STS answers.
	{"AWS", "secret access key (after a label)", `(?i:aws_?secret_?access_?key|secret_?access_?key|aws_?secret)["'\s]{0,3}(?:[:=]|=>)?["'\s]{0,5}([A-Za-z0-9/+]{40})`},
	// JSON Web Tokens: base64url header and claims, both JSON objects, so
	// "eyJ"; the signature may be empty (RFC 7519, RFC 7515 compact form).
	{"JWT", "JSON Web Token (eyJ….eyJ….…)", `eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`},
	// GitLab: personal "glpat-" + 20 of [0-9A-Za-z_-] (or the longer routable
	// form), pipeline trigger "glptt-", deploy "gldt-", runner "glrt-",
	// other "gl…-" prefixes (docs.gitlab.com/ee/security/token_overview).
	{"GitLab", "token (glpat-, glptt-, gldt-, glrt-, …)", `gl(?:pat|ptt|dt|rt|soat|cbt|imt|ft|agent|oas)-[0-9A-Za-z_-]{20,}`},
	// npm: "npm_" + 36 alphanumerics (docs.npmjs.com access tokens; GitHub
	// secret scanning npm_access_token).
	{"npm", "access token (npm_)", `npm_[A-Za-z0-9]{30,}`},
	// PyPI: "pypi-" + a macaroon whose base64 starts "AgEIcHlwaS5vcmc"
	// (pypi.org/help/#apitoken).
	{"PyPI", "API token (pypi-)", `pypi-AgE[A-Za-z0-9_-]{40,}`},
	// Twilio: API key SIDs "SK" + 32 hex (twilio.com/docs/iam/api-keys).
	{"Twilio", "API key (SK + 32 hex)", `SK[0-9a-fA-F]{32}`},
	// SendGrid: "SG." + 22 + "." + 43 of base64url (docs.sendgrid.com API keys).
	{"SendGrid", "API key (SG.)", `SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}`},
	// Perplexity: "pplx-" + 48 alphanumerics (docs.perplexity.ai).
	{"Perplexity", "API key (pplx-)", `pplx-[A-Za-z0-9]{32,}`},
	// Replicate: "r8_" + 37 alphanumerics (replicate.com/account/api-tokens).
	{"Replicate", "API token (r8_)", `r8_[A-Za-z0-9]{30,}`},
	// DigitalOcean: "dop_v1_" / "doo_v1_" + 64 hex (docs.digitalocean.com tokens).
	{"DigitalOcean", "token (dop_v1_)", `do[opr]_v1_[a-f0-9]{40,}`},
	// Databricks: "dapi" + 32 hex (docs.databricks.com personal access tokens).
	{"Databricks", "personal access token (dapi)", `dapi[a-f0-9]{32}`},
	// PEM private keys: the whole block, or everything after its header when
	// the block is cut (RFC 7468; PKCS#1, PKCS#8, EC, OpenSSH, PGP).
	{"PEM", "private key block", `-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)`},
	// Any vendor: a bearer token, and a long opaque value after a key-like
	// label (api_key: …, "x-api-key": …, password=…, secret …): Azure
	// OpenAI's 32 hex digits, Mistral's and Cohere's prefixless keys, Twilio
	// auth tokens. Values shorter than 20 characters are left.
	{"any", "bearer token", `(?i:bearer)\s+([A-Za-z0-9_+/=.~-]{20,})`},
	{"any", "value after a key-like label", `(?i:api[_-]?key|api[_-]?token|access[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|subscription[_-]?key|private[_-]?key|password|passwd|secret|token)["'\s]{0,3}(?:[:=]|=>)?["'\s]{0,5}([A-Za-z0-9_+/=.~-]{20,})`},
}

// secretRE is every format in one expression: one pass over the text.
var secretRE = func() *regexp.Regexp {
	alts := make([]string, len(secretFormats))
	for i, f := range secretFormats {
		alts[i] = "(?:" + f.pattern + ")"
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}()

// SecretPattern is every credential format capture hides, in one
// expression: a match's first capturing group, when it has one, is the
// credential after its label. The guardrails' secrets check reads text
// with it.
func SecretPattern() *regexp.Regexp { return secretRE }

// secretTriggers are substrings one of which every match of secretRE
// holds: text without any of them is skipped without running the
// expression. Lowercased; the text is searched lowercased too.
var secretTriggers = []string{
	"sk", "rk_", "xai-", "gh", "github_pat_", "hf_", "api_org_", "xox", "xapp-", "whsec_", "aiza", "ya29.",
	"akia", "asia", "abia", "acca", "fwogzxivyxdz", "iqojb3jpz2lu", "secret", "eyj", "gl", "npm_", "pypi-", "sg.",
	"pplx-", "r8_", "_v1_", "dapi", "private key", "bearer", "key", "token", "passw",
}

// mayHoldSecret reports whether s holds one of secretTriggers.
func mayHoldSecret(s string) bool {
	ls := strings.ToLower(s)
	for _, t := range secretTriggers {
		if strings.Contains(ls, t) {
			return true
		}
	}
	return false
}

// maxLabelLen bounds a label of the labelled formats with what may
// follow it inside a value ("aws_secret_access_key=").
const maxLabelLen = 48

// searched, when set (by tests), is told the length of every text the
// secrets' expression searches: their sum is findSecrets' work, the
// expression's own being linear in the text (Go's regexp).
var searched func(n int)

// findSecrets calls add with the byte range of every credential in s.
func findSecrets(s string, add func(a, b int)) {
	if !mayHoldSecret(s) {
		return
	}
	for at := 0; at < len(s); {
		if searched != nil {
			searched(len(s) - at)
		}
		m := secretRE.FindStringSubmatchIndex(s[at:])
		if m == nil {
			return
		}
		a, b := at+m[0], at+m[1]
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 { // a labelled value: hide the value only
				a, b = at+m[g], at+m[g+1]
				break
			}
		}
		if b > a {
			add(a, b)
		}
		// What was hidden may end with a label whose value follows it
		// ("api_key aws_secret_access_key = …", "ghp_…token: …"): look
		// again from its last maxLabelLen bytes (not from its start, which
		// would be quadratic in "api_key=api_key=…").
		at = max(a, b-maxLabelLen, at+m[0]+1)
	}
}
