package responses_test

import (
	"testing"

	"modelgate/translate"
	"modelgate/translate/anthropic"
	"modelgate/translate/openai"
	"modelgate/translate/responses"
	"modelgate/translate/translatetest"
)

// Both Responses translators answer a success body they cannot use with
// an error wrapping translate.ErrUpstream: the passthrough a body that is
// no Response object, the bridge one its chat translator cannot use or
// whose completion has no choice.
func TestUnusableSuccessBodies(t *testing.T) {
	req, err := responses.ParseRequest([]byte(`{"model":"m","input":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	target := translate.Target{Provider: "openai", Model: "gpt-4o"}
	t.Run("passthrough", func(t *testing.T) {
		translatetest.CheckUnusable(t, func() translate.Translator { return responses.NewPassthrough(target, req, nil, "resp_1") },
			"application/json", `{}`, `{"object":"response"}`, `{"output":null}`, `{"output":"x"}`, `{"output":{}}`, `{"output":[null]}`, `{"output":[1]}`)
	})
	chatReq, err := responses.ToChat(req, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("bridge/openai", func(t *testing.T) {
		translatetest.CheckUnusable(t, func() translate.Translator {
			return responses.NewTranslator(openai.NewChat(target, chatReq), req, nil, "resp_1", 1)
		}, "application/json", `{}`, `{"choices":[]}`, `{"choices":[null]}`, `{"choices":"x"}`)
	})
	t.Run("bridge/anthropic", func(t *testing.T) {
		translatetest.CheckUnusable(t, func() translate.Translator {
			return responses.NewTranslator(anthropic.NewChat(translate.Target{Provider: "anthropic", Model: "claude"}, chatReq), req, nil, "resp_1", 1)
		}, "application/json", `{}`, `{"id":"msg_1","content":[null]}`)
	})
}
