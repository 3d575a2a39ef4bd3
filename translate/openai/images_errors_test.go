package openai_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/azure"
	"modelgate/translate/bedrock"
	"modelgate/translate/gemini"
	"modelgate/translate/openai"
	"modelgate/translate/vertex"
)

// imageProviders build each provider's translator for an upstream model.
var imageProviders = map[string]func(translate.Target, *api.ImagesRequest) translate.Translator{
	"openai": openai.NewImages, "azure": azure.NewImages, "gemini": gemini.NewImages, "vertex": vertex.NewImages, "bedrock": bedrock.NewImages,
}

// clientError is what the client is told: the HTTP status and the error
// object's type, param and code ("" for null).
type clientError struct {
	status            int
	typ, param, code  string
	messageContaining string
}

// imageOutcome plays one exchange: the request is parsed and translated
// and, if that succeeded and the case has an upstream answer, the answer is
// translated back. The first error the client would get is returned.
func imageOutcome(t *testing.T, provider, model, body string, upStatus int, upBody string) (clientError, bool) {
	t.Helper()
	fromRequestError := func(err error) clientError {
		var re *api.RequestError
		if !errors.As(err, &re) {
			t.Fatalf("error %v is not a *RequestError", err)
		}
		status := re.Status
		if status == 0 {
			status = http.StatusBadRequest
		}
		return clientError{status: status, typ: "invalid_request_error", param: re.Param, code: re.Code, messageContaining: re.Message}
	}
	req, err := api.ParseImagesRequest([]byte(body))
	if err != nil {
		return fromRequestError(err), true
	}
	tr := imageProviders[provider](translate.Target{Provider: provider, Model: model, APIKey: "k", Project: "p"}, req)
	if _, err := tr.RequestBody(); err != nil {
		return fromRequestError(err), true
	}
	if upStatus == 0 {
		return clientError{}, false
	}
	head := tr.ResponseHeaders(upStatus, "application/json")
	out, err := tr.ResponseBody([]byte(upBody), true)
	if err != nil {
		return fromRequestError(err), true
	}
	if head.Status/100 == 2 {
		return clientError{}, false
	}
	spec.ValidateT(t, "ErrorResponse", out)
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out, &e); err != nil {
		t.Fatal(err)
	}
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	return clientError{status: head.Status, typ: e.Error.Type, param: deref(e.Error.Param), code: deref(e.Error.Code), messageContaining: e.Error.Message}, true
}

func TestImagesErrors(t *testing.T) {
	const p = `"prompt":"A lighthouse"`
	invalid := func(param string) clientError {
		return clientError{400, "invalid_request_error", param, "invalid_value", ""}
	}
	policy := func(msg string) clientError {
		return clientError{400, "invalid_request_error", "", "content_policy_violation", msg}
	}
	tests := []struct {
		name, provider, model, body string
		upStatus                    int // 0: the request never leaves
		upBody                      string
		want                        clientError
	}{
		// The request, for every provider.
		{"not json", "openai", "dall-e-3", `{`, 0, "", clientError{400, "invalid_request_error", "", "", "parse the JSON body"}},
		{"missing model", "openai", "dall-e-3", `{` + p + `}`, 0, "", clientError{400, "invalid_request_error", "model", "missing_required_parameter", "'model'"}},
		{"empty model", "openai", "dall-e-3", `{"model":"",` + p + `}`, 0, "", clientError{400, "invalid_request_error", "model", "missing_required_parameter", ""}},
		{"model not a string", "openai", "dall-e-3", `{"model":3,` + p + `}`, 0, "", clientError{400, "invalid_request_error", "model", "invalid_type", ""}},
		{"missing prompt", "gemini", "imagen-4.0-generate-001", `{"model":"m"}`, 0, "", clientError{400, "invalid_request_error", "prompt", "missing_required_parameter", "'prompt'"}},
		{"null prompt", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m","prompt":null}`, 0, "", clientError{400, "invalid_request_error", "prompt", "missing_required_parameter", ""}},
		{"prompt too long", "openai", "gpt-image-1", `{"model":"m","prompt":"` + strings.Repeat("a", 32001) + `"}`, 0, "", invalid("prompt")},
		{"n 0", "openai", "dall-e-2", `{"model":"m",` + p + `,"n":0}`, 0, "", invalid("n")},
		{"n 11", "openai", "dall-e-2", `{"model":"m",` + p + `,"n":11}`, 0, "", invalid("n")},
		{"n a string", "openai", "dall-e-2", `{"model":"m",` + p + `,"n":"2"}`, 0, "", clientError{400, "invalid_request_error", "n", "invalid_type", ""}},
		{"size not a size", "openai", "dall-e-3", `{"model":"m",` + p + `,"size":"large"}`, 0, "", invalid("size")},
		{"quality unknown", "openai", "dall-e-3", `{"model":"m",` + p + `,"quality":"ultra"}`, 0, "", invalid("quality")},
		{"response_format png", "openai", "dall-e-3", `{"model":"m",` + p + `,"response_format":"png"}`, 0, "", invalid("response_format")},
		{"style unknown", "openai", "dall-e-3", `{"model":"m",` + p + `,"style":"bold"}`, 0, "", invalid("style")},
		{"output_format gif", "openai", "gpt-image-1", `{"model":"m",` + p + `,"output_format":"gif"}`, 0, "", invalid("output_format")},
		{"output_compression 101", "openai", "gpt-image-1", `{"model":"m",` + p + `,"output_compression":101}`, 0, "", invalid("output_compression")},
		{"background white", "openai", "gpt-image-1", `{"model":"m",` + p + `,"background":"white"}`, 0, "", invalid("background")},
		{"stream", "openai", "gpt-image-1", `{"model":"m",` + p + `,"stream":true}`, 0, "", clientError{400, "invalid_request_error", "stream", "unsupported_value", ""}},

		// What the upstream model makes.
		{"dall-e-3 n 2", "openai", "dall-e-3", `{"model":"m",` + p + `,"n":2}`, 0, "", invalid("n")},
		{"dall-e-3 size 512", "openai", "dall-e-3", `{"model":"m",` + p + `,"size":"512x512"}`, 0, "", invalid("size")},
		{"dall-e-2 hd", "openai", "dall-e-2", `{"model":"m",` + p + `,"quality":"hd"}`, 0, "", invalid("quality")},
		{"dall-e-2 style", "openai", "dall-e-2", `{"model":"m",` + p + `,"style":"vivid"}`, 0, "", invalid("style")},
		{"gpt-image size 1792", "openai", "gpt-image-1", `{"model":"m",` + p + `,"size":"1792x1024"}`, 0, "", invalid("size")},
		{"gpt-image-2 size not by 16", "openai", "gpt-image-2", `{"model":"m",` + p + `,"size":"1000x1000"}`, 0, "", invalid("size")},
		{"gpt-image-2 size 4:1", "openai", "gpt-image-2", `{"model":"m",` + p + `,"size":"2048x512"}`, 0, "", invalid("size")},
		{"azure dall-e-3 n 2", "azure", "dall-e-3", `{"model":"m",` + p + `,"n":2}`, 0, "", invalid("n")},
		{"imagen n 5", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"n":5}`, 0, "", invalid("n")},
		{"imagen size 123x456", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"size":"123x456"}`, 0, "", invalid("size")},
		{"vertex imagen size 3:2", "vertex", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"size":"1536x1024"}`, 0, "", invalid("size")},
		{"imagen style", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"style":"natural"}`, 0, "", invalid("style")},
		{"imagen webp", "vertex", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"output_format":"webp"}`, 0, "", invalid("output_format")},
		{"imagen transparent", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"background":"transparent"}`, 0, "", invalid("background")},
		{"nova n 6", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `,"n":6}`, 0, "", invalid("n")},
		{"nova 256x256", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `,"size":"256x256"}`, 0, "", invalid("size")},
		{"nova 5:1", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `,"size":"2560x512"}`, 0, "", invalid("size")},
		{"titan 1792x1024", "bedrock", "amazon.titan-image-generator-v2:0", `{"model":"m",` + p + `,"size":"1792x1024"}`, 0, "", invalid("size")},
		{"bedrock non-amazon model", "bedrock", "stability.sd3-5-large-v1:0", `{"model":"m",` + p + `}`, 0, "", invalid("model")},

		// What the provider answers.
		{"openai 400 passes", "openai", "dall-e-3", `{"model":"m",` + p + `}`, 400,
			`{"error":{"message":"Your request was rejected as a result of our safety system.","type":"invalid_request_error","param":null,"code":"content_policy_violation"}}`,
			policy("safety system")},
		{"openai 401 is the gateway's", "openai", "dall-e-3", `{"model":"m",` + p + `}`, 401,
			`{"error":{"message":"Incorrect API key provided: sk-pro***","type":"invalid_request_error","code":"invalid_api_key"}}`,
			clientError{502, "server_error", "", "provider_authentication_failed", ""}},
		{"openai 429", "openai", "gpt-image-1", `{"model":"m",` + p + `}`, 429,
			`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			clientError{429, "requests", "", "rate_limit_exceeded", ""}},
		{"azure content filter", "azure", "dall-e-3", `{"model":"m",` + p + `}`, 400,
			`{"error":{"code":"content_policy_violation","inner_error":{"code":"ResponsibleAIPolicyViolation"},"message":"Your request was rejected as a result of our safety system."}}`,
			policy("safety system")},
		{"imagen all filtered", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `}`, 200, `{}`, policy("no image was returned")},
		{"imagen filtered with reason", "vertex", "imagen-4.0-generate-001", `{"model":"m",` + p + `,"n":2}`, 200,
			`{"predictions":[{"raiFilteredReason":"Reason one."},{"raiFilteredReason":"Reason one."}]}`, policy("safety system: Reason one.")},
		{"imagen prompt refused", "vertex", "imagen-4.0-generate-001", `{"model":"m",` + p + `}`, 400,
			`{"error":{"code":400,"message":"Image generation failed with the following error: The prompt could not be submitted. This prompt contains sensitive words that violate Google's Responsible AI practices.","status":"INVALID_ARGUMENT"}}`,
			policy("Responsible AI")},
		{"imagen bad argument", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `}`, 400,
			`{"error":{"code":400,"message":"Unsupported aspect ratio","status":"INVALID_ARGUMENT"}}`,
			clientError{400, "invalid_request_error", "", "invalid_argument", "Unsupported aspect ratio"}},
		{"imagen quota", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `}`, 429,
			`{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`,
			clientError{429, "rate_limit_error", "", "resource_exhausted", ""}},
		{"gemini key refused", "gemini", "imagen-4.0-generate-001", `{"model":"m",` + p + `}`, 403,
			`{"error":{"code":403,"message":"API key not valid","status":"PERMISSION_DENIED"}}`,
			clientError{502, "server_error", "", "permission_denied", "rejected the gateway's credentials"}},
		{"nova content filters", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `}`, 400,
			`{"message":"This request has been blocked by our content filters."}`, policy("content filters")},
		{"nova nothing returned", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `}`, 200,
			`{"images":[],"error":"All images were blocked."}`, policy("All images were blocked.")},
		{"bedrock validation", "bedrock", "amazon.titan-image-generator-v2:0", `{"model":"m",` + p + `}`, 400,
			`{"message":"1 validation error detected: Value at 'textToImageParams.text' failed to satisfy constraint"}`,
			clientError{400, "invalid_request_error", "", "", "validation error"}},
		{"bedrock credentials", "bedrock", "amazon.nova-canvas-v1:0", `{"model":"m",` + p + `}`, 403,
			`{"message":"The security token included in the request is invalid."}`, clientError{502, "server_error", "", "", "rejected the gateway's credentials"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, failed := imageOutcome(t, tt.provider, tt.model, tt.body, tt.upStatus, tt.upBody)
			if !failed {
				t.Fatalf("the exchange succeeded, want %+v", tt.want)
			}
			if !strings.Contains(got.messageContaining, tt.want.messageContaining) || got.messageContaining == "" {
				t.Errorf("message %q does not contain %q", got.messageContaining, tt.want.messageContaining)
			}
			got.messageContaining = tt.want.messageContaining
			if got != tt.want {
				t.Errorf("error = %+v\nwant    %+v", got, tt.want)
			}
		})
	}
}
