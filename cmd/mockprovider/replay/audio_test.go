package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"modelgate/translate/api/spec"
)

const recordedText = "The sun rises in the east and sets in the west. This simple fact has been observed by humans for thousands of years."

// postForm sends a transcription form; a nil file leaves the file out.
func postForm(t *testing.T, url string, file []byte, fields ...string) (*http.Response, []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if file != nil {
		fw, _ := w.CreateFormFile("file", "speech.mp3")
		fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	resp, err := http.Post(url, w.FormDataContentType(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, body
}

func TestTranscriptionFormats(t *testing.T) {
	_, ts := start(t, Config{})
	audio := []byte("ID3 audio")
	srt := regexp.MustCompile(`^1\n00:00:00,000 --> 00:00:0\d,\d\d0\nThe sun rises in the east and sets in the west\.\n\n` +
		`2\n00:00:0\d,\d\d0 --> 00:00:07,000\nThis simple fact has been observed by humans for thousands of years\.\n\n$`)
	vtt := regexp.MustCompile(`^WEBVTT\n\n00:00:00\.000 --> 00:00:0\d\.\d\d0\nThe sun rises in the east and sets in the west\.\n\n` +
		`00:00:0\d\.\d\d0 --> 00:00:07\.000\nThis simple fact has been observed by humans for thousands of years\.\n\n$`)
	for _, path := range []string{"/v1/audio/transcriptions", "/openai/deployments/whisper/audio/transcriptions?api-version=2024-10-21"} {
		t.Run(path, func(t *testing.T) {
			resp, body := postForm(t, ts.URL+path, audio, "model", "whisper-1")
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" ||
				!bytes.Equal(body, recorded(t, "openai/audio/audio-transcription-basic.bodies/00.response.json")) {
				t.Errorf("json: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			resp, body = postForm(t, ts.URL+path, audio, "model", "whisper-1", "response_format", "text")
			if resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || string(body) != recordedText+"\n" {
				t.Errorf("text: %s %q", resp.Header.Get("Content-Type"), body)
			}
			for format, re := range map[string]*regexp.Regexp{"srt": srt, "vtt": vtt} {
				resp, body = postForm(t, ts.URL+path, audio, "model", "whisper-1", "response_format", format)
				if resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || !re.Match(body) {
					t.Errorf("%s: %s %q", format, resp.Header.Get("Content-Type"), body)
				}
			}
		})
	}
}

func TestTranscriptionVerboseJSON(t *testing.T) {
	_, ts := start(t, Config{})
	tests := []struct {
		granularities      []string
		segments, hasWords bool
	}{
		{nil, true, false},
		{[]string{"segment"}, true, false},
		{[]string{"word"}, false, true},
		{[]string{"word", "segment"}, true, true},
	}
	for _, tt := range tests {
		fields := []string{"model", "whisper-1", "response_format", "verbose_json"}
		for _, g := range tt.granularities {
			fields = append(fields, "timestamp_granularities[]", g)
		}
		resp, body := postForm(t, ts.URL+"/v1/audio/transcriptions", []byte("ID3"), fields...)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%v: %d %s", tt.granularities, resp.StatusCode, body)
		}
		spec.ValidateT(t, "CreateTranscriptionResponseVerboseJson", body)
		var v struct {
			Text     string
			Duration float64
			Segments []struct {
				Start, End float64
				Text       string
			}
			Words []struct{ Word string }
		}
		json.Unmarshal(body, &v)
		var joined []string
		for _, s := range v.Segments {
			joined = append(joined, strings.TrimSpace(s.Text))
			if s.End <= s.Start || s.End > v.Duration {
				t.Errorf("segment %+v outside 0..%v", s, v.Duration)
			}
		}
		if v.Text != recordedText || (len(v.Segments) > 0) != tt.segments || (len(v.Words) > 0) != tt.hasWords ||
			tt.segments && strings.Join(joined, " ") != recordedText {
			t.Errorf("%v: %s", tt.granularities, body)
		}
		if tt.hasWords && (len(v.Words) != 23 || v.Words[0].Word != "The" || v.Words[22].Word != "years") {
			t.Errorf("%v: words %+v", tt.granularities, v.Words)
		}
	}
}

// The mock reads the form like a provider: without a file, a model or a
// format the endpoint serves it answers 400; Groq's path has no srt or vtt.
func TestTranscriptionRejects(t *testing.T) {
	_, ts := start(t, Config{})
	tests := []struct {
		name, path string
		file       []byte
		fields     []string
		status     int
	}{
		{"no file", "/v1/audio/transcriptions", nil, []string{"model", "whisper-1"}, 400},
		{"no model", "/v1/audio/transcriptions", []byte("ID3"), nil, 400},
		{"unknown format", "/v1/audio/transcriptions", []byte("ID3"), []string{"model", "m", "response_format", "xml"}, 400},
		{"groq srt", "/openai/v1/audio/transcriptions", []byte("ID3"), []string{"model", "whisper-large-v3", "response_format", "srt"}, 400},
		{"groq vtt", "/openai/v1/audio/transcriptions", []byte("ID3"), []string{"model", "whisper-large-v3", "response_format", "vtt"}, 400},
		{"azure without api-version", "/openai/deployments/w/audio/transcriptions", []byte("ID3"), []string{"model", "m"}, 404},
		{"recorded 400", "/v1/audio/transcriptions", []byte("ID3"), []string{"model", "mock-error-400"}, 400},
	}
	for _, tt := range tests {
		resp, body := postForm(t, ts.URL+tt.path, tt.file, tt.fields...)
		if resp.StatusCode != tt.status || !bytes.Contains(body, []byte(`"invalid_request_error"`)) {
			t.Errorf("%s: %d %s", tt.name, resp.StatusCode, body)
		}
	}
	resp, body := postForm(t, ts.URL+"/openai/v1/audio/transcriptions", []byte("ID3"), "model", "whisper-large-v3", "response_format", "verbose_json")
	if resp.StatusCode != 200 {
		t.Errorf("groq verbose_json: %d %s", resp.StatusCode, body)
	}
	resp, body = postForm(t, ts.URL+"/v1/audio/transcriptions", nil)
	if resp.StatusCode != 400 {
		t.Errorf("empty form: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", ts.URL+"/v1/audio/transcriptions", strings.NewReader(`{"model":"whisper-1"}`))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("json body: %v %v", err, resp)
	}
}
