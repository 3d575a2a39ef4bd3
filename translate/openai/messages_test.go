package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/translatetest"
)

// big is a client string of 1 MiB; no error message may quote it whole.
var big = strings.Repeat("A", 1<<20)

// bigNumber is a JSON number of 1 MiB.
var bigNumber = "1" + strings.Repeat("0", 1<<20)

const maxClientMessage = 1024

// Parse errors name members in OpenAI's words, quote client text bounded
// and never say what encoding/json or Go would.
func TestParseErrorMessagesAreBounded(t *testing.T) {
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	chat := []string{
		`{"model":"` + big + `","messages":5}`,
		`{"model":"` + big + `","messages":[{"role":"` + big + `"}]}`,
		`{"model":"m","messages":[{"role":"user"}],"temperature":` + bigNumber + `}`,
		`{"model":"m",` + msgs + `,"max_tokens":-` + bigNumber + `}`,
		`{"model":"m",` + msgs + `,"n":` + bigNumber + `}`,
		`{"model":"m","messages":[{"role":5}]}`,
		`{"model":5,` + msgs + `}`,
		`{"` + big + `":1}`,
		big,
	}
	for _, body := range chat {
		_, err := api.ParseChatRequest([]byte(body))
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
	embeddings := []string{
		`{"model":"` + big + `","input":5}`,
		`{"model":"m","input":"x","encoding_format":"` + big + `"}`,
		`{"model":"m","input":"x","dimensions":` + bigNumber + `}`,
		`{"model":"m","input":[-` + bigNumber + `]}`,
		`{"model":"m","input":"x","user":5}`,
		`{"model":"m","input":[["` + big + `"]]}`,
	}
	for _, body := range embeddings {
		_, err := api.ParseEmbeddingsRequest([]byte(body))
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
	p := `"prompt":"a cat"`
	images := []string{
		`{"model":"` + big + `",` + p + `,"size":"` + big + `"}`,
		`{"model":"m",` + p + `,"size":"` + big + `x1"}`,
		`{"model":"m",` + p + `,"quality":"` + big + `"}`,
		`{"model":"m",` + p + `,"response_format":"` + big + `"}`,
		`{"model":"m",` + p + `,"style":"` + big + `"}`,
		`{"model":"m",` + p + `,"user":{"a":1}}`,
		`{"model":"m","prompt":"` + big + `"}`,
		`{"model":"m",` + p + `,"output_compression":` + bigNumber + `}`,
	}
	for _, body := range images {
		_, err := api.ParseImagesRequest([]byte(body))
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
}

func TestTranscriptionErrorMessagesAreBounded(t *testing.T) {
	okFile := file("speech.mp3", "audio/mpeg", mp3)
	model := text("model", big)
	forms := [][]field{
		{okFile, model, text("response_format", big)},
		{okFile, model, text("temperature", big)},
		{okFile, model, text("temperature", bigNumber)},
		{okFile, model, text("temperature", strings.Repeat("\x00", 1<<16))},
		{okFile, model, text("stream", big)},
		{okFile, model, text("timestamp_granularities[]", big)},
		{okFile, model, text("language", "en"), text("timestamp_granularities[]", "word"), text("response_format", "json")},
		{file(big+".bin", big, []byte("not audio")), model},
		{file(strings.Repeat("\x01", 1<<16), strings.Repeat("\"", 1<<16), []byte("not audio")), model},
	}
	for _, fields := range forms {
		ct, body := encodeForm(t, fields...)
		_, err := api.ParseTranscriptionRequest(ct, body)
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
	for _, ct := range []string{"text/plain; x=" + big, big, "multipart/form-data; boundary=" + big} {
		_, err := api.ParseTranscriptionRequest(ct, []byte("x"))
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
}

// chatView is a translator's view of a chat request, as the providers'
// request builders decode it.
type chatView struct {
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	MaxTokens *int64            `json:"max_tokens"`
	User      string            `json:"user"`
	Tools     []json.RawMessage `json:"tools"`
	Seed      *int64            `json:"seed"`
	Metadata  map[string]string `json:"metadata"`
	Format    *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

// Decode's errors name the member with its indices and the JSON kinds,
// never Go types.
func TestDecodeErrors(t *testing.T) {
	const m = `"model":"m","messages":[{"role":"user","content":"hi"}`
	tests := []struct {
		body, param, message string
	}{
		{`{` + m + `,{"role":"assistant","tool_calls":"x"}]}`, "messages[1].tool_calls",
			"Invalid type for 'messages[1].tool_calls': expected an array, but got a string instead."},
		{`{` + m + `,{"role":"assistant","tool_calls":[{"function":{"name":["f"]}}]}]}`, "messages[1].tool_calls[0].function.name",
			"Invalid type for 'messages[1].tool_calls[0].function.name': expected a string, but got an array instead."},
		{`{` + m + `,{"role":"assistant","tool_calls":[{"id":{"a":1}}]}]}`, "messages[1].tool_calls[0].id",
			"Invalid type for 'messages[1].tool_calls[0].id': expected a string, but got an object instead."},
		{`{` + m + `],"user":5}`, "user", "Invalid type for 'user': expected a string, but got a number instead."},
		{`{` + m + `],"tools":{"a":1}}`, "tools", "Invalid type for 'tools': expected an array, but got an object instead."},
		{`{` + m + `],"seed":1.5}`, "seed", "Invalid type for 'seed': expected an integer, but got a number instead."},
		{`{` + m + `],"seed":true}`, "seed", "Invalid type for 'seed': expected an integer, but got a boolean instead."},
		{`{` + m + `],"metadata":{"k":[1]}}`, "metadata.k", "Invalid type for 'metadata.k': expected a string, but got an array instead."},
		{`{` + m + `],"response_format":"json"}`, "response_format", "Invalid type for 'response_format': expected an object, but got a string instead."},
		{`{` + m + `],"metadata":{"` + big + `":5}}`, "", ""},
	}
	for _, tt := range tests {
		req, err := api.ParseChatRequest([]byte(tt.body))
		if err != nil {
			t.Fatalf("%.100s: %v", tt.body, err)
		}
		var v chatView
		err = req.Decode(&v)
		translatetest.CheckClientMessage(t, err, maxClientMessage)
		var re *api.RequestError
		if !errors.As(err, &re) {
			continue
		}
		if tt.message != "" && (re.Param != tt.param || re.Message != tt.message || re.Code != "invalid_type") {
			t.Errorf("%.100s: error %+v\nwant param %q, message %q", tt.body, *re, tt.param, tt.message)
		}
	}
}

// Invalid and the image errors quote client strings bounded.
func TestInvalidClipsArguments(t *testing.T) {
	for _, err := range []error{
		api.Invalid("tool_choice", "Invalid 'tool_choice': '%s'.", big),
		api.Invalid("x", "got %s", json.RawMessage(bigNumber)),
		api.Invalid("x", "got %s", []byte(big)),
		api.ImageSizeError(big, big, []string{"auto"}),
		api.ImageParamError("style", big, big),
		api.ImageCountError(big, 2, 1),
	} {
		translatetest.CheckClientMessage(t, err, maxClientMessage)
	}
}

// The translators' own request errors are bounded too.
func TestTranslatorRequestErrorsAreBounded(t *testing.T) {
	req, err := api.ParseEmbeddingsRequest([]byte(`{"model":"m","input":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewCompatibleEmbeddings(CompatibleProviders()["mistral"])(translate.Target{Model: big}, req).RequestBody()
	translatetest.CheckClientMessage(t, err, maxClientMessage)
	ireq, err := api.ParseImagesRequest([]byte(`{"model":"m","prompt":"a cat","size":"4096x4096","n":5}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewImages(translate.Target{Model: "dall-e-3" + big}, ireq).RequestBody()
	translatetest.CheckClientMessage(t, err, maxClientMessage)
}
