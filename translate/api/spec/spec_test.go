package spec_test

import (
	"os"
	"strings"
	"testing"

	"modelgate/translate/api/spec"
	_ "modelgate/translate/translatetest" // -update, so go test ./translate/... -update runs here too
)

// Real OpenAI responses deviate from the document in two ways the gateway
// repairs: "system_fingerprint": null (typed string) and choices without the
// required "logprobs". The validator must see both.
func TestRecordedUpstreamDeviations(t *testing.T) {
	body, err := os.ReadFile("../../../testdata/fixtures/openai/chat/chat-basic.bodies/00.response.json")
	if err != nil {
		t.Fatal(err)
	}
	err = spec.Validate("CreateChatCompletionResponse", body)
	if err == nil {
		t.Fatal("recorded chat-basic response validates; want its deviations rejected")
	}
	for _, want := range []string{"/system_fingerprint", "missing property 'logprobs'"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

func TestRecordedStreamChunksValidate(t *testing.T) {
	body, err := os.ReadFile("../../../testdata/fixtures/openai/chat/chat-streaming.bodies/00.response.sse")
	if err != nil {
		t.Fatal(err)
	}
	fixed := strings.ReplaceAll(string(body), `"system_fingerprint":null,`, "")
	spec.ValidateSSE(t, "CreateChatCompletionStreamResponse", []byte(fixed))
}

func TestRejectsInvalidBodies(t *testing.T) {
	tests := []struct{ name, schema, body string }{
		{"error without code", "ErrorResponse", `{"error":{"message":"m","type":"t","param":null}}`},
		{"model without owned_by", "Model", `{"id":"m","object":"model","created":1}`},
		{"list with wrong object", "ListModelsResponse", `{"object":"lists","data":[]}`},
		{"chunk with choices not an array", "CreateChatCompletionStreamResponse",
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := spec.Validate(tt.schema, []byte(tt.body)); err == nil {
				t.Errorf("spec.Validate(%s, %s) = nil, want an error", tt.schema, tt.body)
			}
		})
	}
}

func TestAcceptsValidBodies(t *testing.T) {
	tests := []struct{ name, schema, body string }{
		{"error with nulls", "ErrorResponse", `{"error":{"message":"m","type":"t","param":null,"code":null}}`},
		{"model list", "ListModelsResponse", `{"object":"list","data":[{"id":"m","object":"model","created":1,"owned_by":"o"}]}`},
		{"chunk with null usage (nullable)", "CreateChatCompletionStreamResponse",
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec.ValidateT(t, tt.schema, []byte(tt.body))
		})
	}
}
