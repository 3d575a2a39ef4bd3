package azure

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
)

func newTranscription(t *testing.T, target translate.Target, fields map[string]string) translate.Translator {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, _ := w.CreateFormFile("file", "speech.wav")
	fw.Write([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	for k, v := range fields {
		w.WriteField(k, v)
	}
	w.Close()
	req, err := api.ParseTranscriptionRequest(w.FormDataContentType(), buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return NewTranscription(target, req)
}

func TestTranscriptionRequest(t *testing.T) {
	tr := newTranscription(t, translate.Target{Provider: "azure", Model: "my whisper", APIKey: "azure-key", BasePath: "/prefix", APIVersion: "2024-06-01"},
		map[string]string{"model": "whisper-1", "response_format": "srt"})
	up, err := tr.RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/prefix/openai/deployments/my%20whisper/audio/transcriptions?api-version=2024-06-01" {
		t.Errorf("path = %q", up.Path)
	}
	if len(up.Headers) != 2 || up.Headers[1] != (translate.Header{Name: "api-key", Value: "azure-key"}) ||
		!strings.HasPrefix(up.Headers[0].Value, "multipart/form-data; boundary=") {
		t.Errorf("headers = %+v", up.Headers)
	}
	_, params, _ := mime.ParseMediaType(up.Headers[0].Value)
	r := multipart.NewReader(bytes.NewReader(up.Body), params["boundary"])
	got := map[string]string{}
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		got[p.FormName()] = string(b)
	}
	// Azure serves srt itself: it is asked for, and the model is the deployment.
	if got["model"] != "my whisper" || got["response_format"] != "srt" || !strings.HasPrefix(got["file"], "RIFF") {
		t.Errorf("upstream form = %q", got)
	}
	up, _ = newTranscription(t, translate.Target{Provider: "azure", Model: "d"}, map[string]string{"model": "m"}).RequestBody()
	if !strings.HasSuffix(up.Path, "api-version="+DefaultAPIVersion) {
		t.Errorf("default version path = %q", up.Path)
	}
}

// Azure answers like OpenAI (the recorded OpenAI answer stands in for it).
func TestTranscriptionResponse(t *testing.T) {
	body, err := os.ReadFile("../../testdata/fixtures/openai/audio/audio-transcription-basic.bodies/00.response.json")
	if err != nil {
		t.Fatal(err)
	}
	tr := newTranscription(t, translate.Target{Provider: "azure", Model: "d"}, map[string]string{"model": "m"})
	head := tr.ResponseHeaders(200, "application/json")
	out, err := tr.ResponseBody(body, true)
	if err != nil || head.ContentType != "application/json" {
		t.Fatalf("head %+v, error %v", head, err)
	}
	spec.ValidateT(t, "CreateTranscriptionResponseJson", out)
	if s := tr.Usage().AudioSeconds; s != 7 {
		t.Errorf("audio seconds = %v, want 7", s)
	}
	tr = newTranscription(t, translate.Target{Provider: "azure", Model: "d"}, map[string]string{"model": "m"})
	head = tr.ResponseHeaders(401, "application/json")
	out, _ = tr.ResponseBody([]byte(`{"error":{"code":"401","message":"Access denied due to invalid subscription key."}}`), true)
	if head.Status != 502 || !bytes.Contains(out, []byte("provider_authentication_failed")) {
		t.Errorf("refused key: %d %s", head.Status, out)
	}
}

// A verbose_json answer without usage records its duration as the audio
// seconds; one with duration usage records the usage's seconds.
func TestTranscriptionAudioSeconds(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       float64
	}{
		{"duration", `{"task":"transcribe","language":"english","duration":12.5,"text":"x","segments":[]}`, 12.5},
		{"usage seconds", `{"task":"transcribe","language":"english","duration":12.5,"text":"x","usage":{"type":"duration","seconds":13}}`, 13},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTranscription(t, translate.Target{Provider: "azure", Model: "d"}, map[string]string{"model": "m", "response_format": "verbose_json"})
			tr.ResponseHeaders(200, "application/json")
			if _, err := tr.ResponseBody([]byte(tt.body), true); err != nil {
				t.Fatal(err)
			}
			if got := tr.Usage().AudioSeconds; got != tt.want {
				t.Errorf("AudioSeconds = %v, want %v", got, tt.want)
			}
		})
	}
}
