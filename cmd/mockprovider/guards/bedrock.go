package guards

import (
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"modelgate/translate/bedrock"
)

func init() {
	routes = append(routes, route{"POST /guardrail/{id}/version/{version}/apply", applyGuardrail})
}

// AWSAccessKeyID and AWSSecretAccessKey are the credentials the Bedrock
// emulator takes (with any session token): it checks the signature as
// translate/bedrock.Sign makes it, without AWS's clock skew limit.
const (
	AWSAccessKeyID     = "AKIDMODELGATEGUARDS"
	AWSSecretAccessKey = "modelgate-guards-dev-secret"
)

// applyGuardrail emulates AWS Bedrock's ApplyGuardrail
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ApplyGuardrail.html)
// with a guardrail whose one regular expression, ZEBRA, is Flagged and
// anonymizes what it matches: it intervenes with a regexes assessment per
// match and the text with each match replaced by {ZEBRA}.
func applyGuardrail(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		awsError(w, http.StatusBadRequest, "ValidationException", "the request body could not be read")
		return
	}
	if kind, msg := checkSigV4(r, body); kind != "" {
		awsError(w, http.StatusForbidden, kind, msg)
		return
	}
	var req struct {
		Source  string `json:"source"`
		Content []struct {
			Text *struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(body, &req) != nil || (req.Source != "INPUT" && req.Source != "OUTPUT") || len(req.Content) == 0 {
		awsError(w, http.StatusBadRequest, "ValidationException", "source must be INPUT or OUTPUT and content a list of text blocks")
		return
	}
	var texts []string
	for _, c := range req.Content {
		if c.Text == nil {
			awsError(w, http.StatusBadRequest, "ValidationException", "every content block must be a text block")
			return
		}
		texts = append(texts, c.Text.Text)
	}
	emitJSON(w, http.StatusOK, guardrailAnswer(strings.Join(texts, "\n")))
}

// guardrailAnswer is ApplyGuardrail's answer about text.
func guardrailAnswer(text string) map[string]any {
	units := len(text)/1000 + 1
	answer := map[string]any{
		"action":  "NONE",
		"outputs": []any{},
		"assessments": []any{map[string]any{
			"invocationMetrics": map[string]any{"guardrailProcessingLatency": 1},
		}},
		"usage": map[string]any{"topicPolicyUnits": 0, "contentPolicyUnits": 0, "wordPolicyUnits": 0,
			"sensitiveInformationPolicyUnits": units, "sensitiveInformationPolicyFreeUnits": 0, "contextualGroundingPolicyUnits": 0},
	}
	matches := Flagged.FindAllString(text, -1)
	if matches == nil {
		return answer
	}
	regexes := make([]any, len(matches))
	for i, m := range matches {
		regexes[i] = map[string]any{"name": "ZEBRA", "match": m, "regex": Flagged.String(), "action": "ANONYMIZED", "detected": true}
	}
	answer["action"] = "GUARDRAIL_INTERVENED"
	answer["actionReason"] = "Guardrail masked."
	answer["outputs"] = []any{map[string]any{"text": Flagged.ReplaceAllLiteralString(text, "{ZEBRA}")}}
	answer["assessments"] = []any{map[string]any{"sensitiveInformationPolicy": map[string]any{"regexes": regexes}}}
	return answer
}

// checkSigV4 checks r is signed with AWS Signature Version 4 for service
// bedrock with the emulator's credentials; when not, it is AWS's error
// type and message.
func checkSigV4(r *http.Request, body []byte) (kind, msg string) {
	auth := r.Header.Get("Authorization")
	date := r.Header.Get("X-Amz-Date")
	cred, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 Credential=")
	if !ok || date == "" {
		return "MissingAuthenticationTokenException", "Missing Authentication Token"
	}
	cred, _, _ = strings.Cut(cred, ",")
	scope := strings.Split(cred, "/") // key id, day, region, service, aws4_request
	if len(scope) != 5 || scope[0] != AWSAccessKeyID {
		return "UnrecognizedClientException", "The security token included in the request is invalid."
	}
	at, err := time.Parse("20060102T150405Z", date)
	if err != nil || scope[1] != date[:8] || scope[3] != "bedrock" || scope[4] != "aws4_request" {
		return "InvalidSignatureException", "Credential should be scoped to a valid date, region and service bedrock."
	}
	creds := bedrock.Credentials{AccessKeyID: AWSAccessKeyID, SecretAccessKey: AWSSecretAccessKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	want := bedrock.Sign(creds, scope[2], r.Method, r.Host, r.URL.EscapedPath(), r.Header.Get("Content-Type"), body, at)
	if !hmac.Equal([]byte(want[0].Value), []byte(auth)) {
		return "InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method."
	}
	return "", ""
}

// awsError answers as AWS's JSON APIs fail: the error type in a header,
// the message in the body.
func awsError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("X-Amzn-Errortype", kind)
	emitJSON(w, status, map[string]string{"message": msg})
}

// emitJSON answers v as JSON with status.
func emitJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}
