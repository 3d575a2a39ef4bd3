package openai

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
)

// field is one part of a test form; a file part has a filename or a
// content type.
type field struct {
	Name, Filename, ContentType, Value string
	File                               bool
}

func file(name, contentType string, data []byte) field {
	return field{Name: "file", Filename: name, ContentType: contentType, Value: string(data), File: true}
}

func text(name, value string) field { return field{Name: name, Value: value} }

// encodeForm builds a multipart/form-data body with mime/multipart, the way
// clients do.
func encodeForm(t testing.TB, fields ...field) (contentType string, body []byte) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, f := range fields {
		h := textproto.MIMEHeader{}
		if f.File {
			h.Set("Content-Disposition", multipart.FileContentDisposition(f.Name, f.Filename))
			if f.ContentType != "" {
				h.Set("Content-Type", f.ContentType)
			}
		} else {
			h.Set("Content-Disposition", `form-data; name="`+f.Name+`"`)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(f.Value))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.FormDataContentType(), buf.Bytes()
}

// decodeForm reads a body back with mime/multipart.
func decodeForm(t testing.TB, contentType string, body []byte) []field {
	t.Helper()
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("content type %q: %v", contentType, err)
	}
	r := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	var out []field
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("upstream body: %v", err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		_, disp, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
		_, isFile := disp["filename"]
		out = append(out, field{Name: p.FormName(), Filename: disp["filename"], ContentType: p.Header.Get("Content-Type"), Value: string(b), File: isFile})
	}
}

var mp3 = append([]byte("ID3\x04\x00\x00\x00\x00\x00\x00"), bytes.Repeat([]byte{0xFF, 0xFB, 0x90, 0x00}, 64)...)

func TestParseTranscriptionRequestErrors(t *testing.T) {
	okFile := file("speech.mp3", "audio/mpeg", mp3)
	model := text("model", "whisper-1")
	form := func(fields ...field) (string, []byte) { return encodeForm(t, fields...) }
	ct, body := form(okFile, model)
	boundary := strings.TrimPrefix(ct, "multipart/form-data; boundary=")
	tests := []struct {
		name        string
		contentType string
		body        []byte
		status      int
		param, code string
	}{
		{"no content type", "", body, 415, "", "unsupported_media_type"},
		{"json", "application/json", []byte(`{"model":"whisper-1"}`), 415, "", "unsupported_media_type"},
		{"urlencoded", "application/x-www-form-urlencoded", []byte("model=whisper-1"), 415, "", "unsupported_media_type"},
		{"multipart/mixed", "multipart/mixed; boundary=" + boundary, body, 415, "", "unsupported_media_type"},
		{"unparsable content type", "multipart/form-data; boundary", body, 415, "", "unsupported_media_type"},
		{"no boundary", "multipart/form-data", body, 400, "", "invalid_multipart_body"},
		{"empty boundary", `multipart/form-data; boundary=""`, body, 400, "", "invalid_multipart_body"},
		{"boundary too long", "multipart/form-data; boundary=" + strings.Repeat("b", 71), body, 400, "", "invalid_multipart_body"},
		{"boundary with a bad character", `multipart/form-data; boundary="a;b"`, body, 400, "", "invalid_multipart_body"},
		{"other boundary", "multipart/form-data; boundary=otherboundary", body, 400, "", "invalid_multipart_body"},
		{"not multipart", ct, []byte("model=whisper-1"), 400, "", "invalid_multipart_body"},
		{"empty body", ct, nil, 400, "", "invalid_multipart_body"},
		{"no closing boundary", ct, body[:len(body)-len(boundary)-6], 400, "", "invalid_multipart_body"},
		{"bare LF", ct, bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), 400, "", "invalid_multipart_body"},
		{"part without a name", ct, []byte("--" + boundary + "\r\nContent-Disposition: form-data\r\n\r\nx\r\n--" + boundary + "--\r\n"), 400, "", "invalid_multipart_body"},
		{"part without headers", ct, []byte("--" + boundary + "\r\n\r\nx\r\n--" + boundary + "--\r\n"), 400, "", "invalid_multipart_body"},
		{"transfer encoding", ct, []byte("--" + boundary + "\r\nContent-Disposition: form-data; name=model\r\nContent-Transfer-Encoding: base64\r\n\r\nd2hpc3Blci0x\r\n--" + boundary + "--\r\n"), 400, "", "invalid_multipart_body"},
		{"folded header", ct, []byte("--" + boundary + "\r\nContent-Disposition: form-data;\r\n name=model\r\n\r\nx\r\n--" + boundary + "--\r\n"), 400, "", "invalid_multipart_body"},
		{"missing file", "", nil, 400, "file", "missing_required_parameter"},
		{"missing model", "", nil, 400, "model", "missing_required_parameter"},
		{"empty model", "", nil, 400, "model", "missing_required_parameter"},
		{"two files", "", nil, 400, "file", "invalid_value"},
		{"two models", "", nil, 400, "model", "invalid_value"},
		{"text file", "", nil, 415, "file", "unsupported_file_format"},
		{"aac file", "", nil, 415, "file", "unsupported_file_format"},
		{"bad response_format", "", nil, 400, "response_format", "invalid_value"},
		{"word timestamps without verbose_json", "", nil, 400, "timestamp_granularities", "invalid_value"},
		{"unknown granularity", "", nil, 400, "timestamp_granularities", "invalid_value"},
		{"temperature above 1", "", nil, 400, "temperature", "invalid_value"},
		{"temperature below 0", "", nil, 400, "temperature", "invalid_value"},
		{"temperature not a number", "", nil, 400, "temperature", "invalid_type"},
		{"temperature NaN", "", nil, 400, "temperature", "invalid_type"},
		{"stream not a boolean", "", nil, 400, "stream", "invalid_type"},
	}
	forms := map[string][]field{
		"missing file":                         {model},
		"missing model":                        {okFile},
		"empty model":                          {okFile, text("model", "")},
		"two files":                            {okFile, okFile, model},
		"two models":                           {okFile, model, model},
		"text file":                            {file("notes.txt", "text/plain", []byte("hello")), model},
		"aac file":                             {file("speech.aac", "audio/aac", []byte{0xFF, 0xF1, 0x50, 0x80}), model},
		"bad response_format":                  {okFile, model, text("response_format", "xml")},
		"word timestamps without verbose_json": {okFile, model, text("timestamp_granularities[]", "word")},
		"unknown granularity":                  {okFile, model, text("response_format", "verbose_json"), text("timestamp_granularities[]", "sentence")},
		"temperature above 1":                  {okFile, model, text("temperature", "1.5")},
		"temperature below 0":                  {okFile, model, text("temperature", "-0.1")},
		"temperature not a number":             {okFile, model, text("temperature", "hot")},
		"temperature NaN":                      {okFile, model, text("temperature", "NaN")},
		"stream not a boolean":                 {okFile, model, text("stream", "maybe")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if fs, ok := forms[tt.name]; ok {
				tt.contentType, tt.body = form(fs...)
			}
			_, err := api.ParseTranscriptionRequest(tt.contentType, tt.body)
			var re *api.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("error = %v, want a *RequestError (type invalid_request_error)", err)
			}
			status := re.Status
			if status == 0 {
				status = 400
			}
			if status != tt.status || re.Param != tt.param || re.Code != tt.code || re.Message == "" {
				t.Errorf("got %d param %q code %q (%s); want %d param %q code %q", status, re.Param, re.Code, re.Message, tt.status, tt.param, tt.code)
			}
		})
	}
}

// Uploads are identified by extension, content type or content, and what
// OpenAI accepts is accepted.
func TestParseTranscriptionRequestAccepts(t *testing.T) {
	wav := append([]byte("RIFF\x24\x00\x00\x00WAVEfmt "), make([]byte, 32)...)
	tests := []struct {
		name   string
		fields []field
		format string
	}{
		{"extension", []field{file("a.MP3", "", []byte("x"))}, "mp3"},
		{"content type", []field{file("blob", "audio/webm;codecs=opus", []byte("x"))}, "webm"},
		{"sniffed wav", []field{file("", "application/octet-stream", wav)}, "wav"},
		{"sniffed without filename", []field{{Name: "file", Value: string(mp3)}}, "mp3"},
		{"segment timestamps with json", []field{file("a.wav", "", wav), text("timestamp_granularities[]", "segment")}, "wav"},
		{"unknown fields pass", []field{file("a.ogg", "", nil), text("chunking_strategy", "auto"), text("x_vendor", "1")}, "ogg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := encodeForm(t, append(tt.fields, text("model", "m"))...)
			req, err := api.ParseTranscriptionRequest(ct, body)
			if err != nil {
				t.Fatal(err)
			}
			if req.File.Format != tt.format || req.Model != "m" || req.ResponseFormat != "json" {
				t.Errorf("format %q model %q response_format %q", req.File.Format, req.Model, req.ResponseFormat)
			}
		})
	}
}

// A form parsed and re-encoded for the upstream keeps every field, in
// order, with only the model replaced, and the file's bytes unchanged.
func TestTranscriptionRoundTrip(t *testing.T) {
	audio := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range audio {
		audio[i] = byte(r.Uint32())
	}
	ct, body := encodeForm(t, text("model", "whisper-1"),
		file(`my "talk".mp3`, "audio/mpeg", append(append(mp3, "\r\n--not-the-boundary\r\n"...), audio...)),
		text("language", "en"), text("prompt", "Words: \"Envoy\", ext_proc.\r\nSecond line."),
		text("response_format", "verbose_json"), text("temperature", "0.2"),
		text("timestamp_granularities[]", "word"), text("timestamp_granularities[]", "segment"),
		text("include[]", "logprobs"), text("chunking_strategy", `{"type":"server_vad"}`), text("x_vendor", "kept"))
	req, err := api.ParseTranscriptionRequest(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	want := &api.TranscriptionRequest{Model: "whisper-1", Language: "en", Prompt: "Words: \"Envoy\", ext_proc.\r\nSecond line.",
		ResponseFormat: "verbose_json", Temperature: 0.2, TimestampGranularities: []string{"word", "segment"},
		Fields: []api.FormField{{Name: "model", Value: "whisper-1"}, {Name: "language", Value: "en"},
			{Name: "prompt", Value: "Words: \"Envoy\", ext_proc.\r\nSecond line."}, {Name: "response_format", Value: "verbose_json"},
			{Name: "temperature", Value: "0.2"}, {Name: "timestamp_granularities[]", Value: "word"},
			{Name: "timestamp_granularities[]", Value: "segment"}, {Name: "include[]", Value: "logprobs"},
			{Name: "chunking_strategy", Value: `{"type":"server_vad"}`}, {Name: "x_vendor", Value: "kept"}},
		FilePos: 1}
	if diff := cmp.Diff(want, req, cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "File" }, cmp.Ignore())); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	up, err := NewTranscription(translate.Target{Provider: "openai", Model: "whisper-large-v3", APIKey: "sk-up", BasePath: "/openai"}, req).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	if up.Path != "/openai/v1/audio/transcriptions" {
		t.Errorf("path = %q", up.Path)
	}
	upCT := ""
	for _, h := range up.Headers {
		if h.Name == "content-type" {
			upCT = h.Value
		}
	}
	if upCT == ct {
		t.Errorf("the upstream body reuses the client's boundary")
	}
	wantHeaders := []translate.Header{{Name: "content-type", Value: upCT}, {Name: "authorization", Value: "Bearer sk-up"}}
	if diff := cmp.Diff(wantHeaders, up.Headers); diff != "" || !strings.HasPrefix(upCT, "multipart/form-data; boundary=") {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	got := decodeForm(t, upCT, up.Body)
	sent := decodeForm(t, ct, body)
	sent[0].Value = "whisper-large-v3"
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("upstream form (-client form with the upstream model +upstream):\n%s", diff)
	}
}

// A file part without a content type gets the identified format's, not
// RFC 7578's default of text/plain.
func TestTranscriptionFileContentType(t *testing.T) {
	ct, body := encodeForm(t, file("a.wav", "", []byte("x")), text("model", "m"))
	req, err := api.ParseTranscriptionRequest(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	up, err := NewTranscription(translate.Target{Model: "m"}, req).RequestBody()
	if err != nil {
		t.Fatal(err)
	}
	got := decodeForm(t, up.Headers[0].Value, up.Body)
	if got[0].ContentType != "audio/wav" || got[0].Filename != "a.wav" {
		t.Errorf("file part = %+v", got[0])
	}
}

// What the server is asked for: the client's format, or the one the
// gateway renders it from when the server lacks it. A rendered format
// leaves stream out.
func TestTranscriptionAsksUpstream(t *testing.T) {
	groq := CompatibleProviders()["groq"]
	tests := []struct {
		name   string
		quirks Quirks
		sent   []field
		want   []field
	}{
		{"openai srt", Quirks{}, []field{text("response_format", "srt")}, []field{text("response_format", "srt")}},
		{"groq srt", groq, []field{text("response_format", "srt"), text("stream", "true")}, []field{text("response_format", "verbose_json")}},
		{"groq vtt", groq, []field{text("response_format", "vtt")}, []field{text("response_format", "verbose_json")}},
		{"groq text", groq, []field{text("response_format", "text")}, []field{text("response_format", "text")}},
		{"json only text", Quirks{TranscriptionFormats: []string{"json"}}, []field{text("response_format", "text")}, []field{text("response_format", "json")}},
		{"default json", groq, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := encodeForm(t, append([]field{text("model", "public"), file("a.mp3", "audio/mpeg", mp3)}, tt.sent...)...)
			req, err := api.ParseTranscriptionRequest(ct, body)
			if err != nil {
				t.Fatal(err)
			}
			up, err := NewCompatibleTranscription(tt.quirks)(translate.Target{Model: "whisper-large-v3"}, req).RequestBody()
			if err != nil {
				t.Fatal(err)
			}
			want := append([]field{text("model", "whisper-large-v3"), file("a.mp3", "audio/mpeg", mp3)}, tt.want...)
			if diff := cmp.Diff(want, decodeForm(t, up.Headers[0].Value, up.Body)); diff != "" {
				t.Errorf("upstream form (-want +got):\n%s", diff)
			}
		})
	}
}

// A compatible server that lacks a format is asked for one it has.
func TestTranscriptionAsksForProviderFormats(t *testing.T) {
	ct, body := encodeForm(t, text("model", "m"), file("a.mp3", "", mp3), text("response_format", "vtt"))
	req, err := api.ParseTranscriptionRequest(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	for provider, ask := range map[string]string{"openai": "vtt", "groq": "verbose_json", "vllm": "vtt"} {
		if got := NewCompatibleTranscription(CompatibleProviders()[provider])(translate.Target{Provider: provider}, req).(*transcription).ask; got != ask {
			t.Errorf("%s: asks %q, want %q", provider, got, ask)
		}
	}
}

func BenchmarkTranscriptionParseEncode5MiB(b *testing.B) {
	audio := make([]byte, 5<<20)
	copy(audio, mp3)
	ct, body := encodeForm(b, file("speech.mp3", "audio/mpeg", audio), text("model", "whisper-1"),
		text("language", "en"), text("response_format", "verbose_json"), text("timestamp_granularities[]", "segment"))
	target := translate.Target{Provider: "openai", Model: "whisper-1", APIKey: "sk"}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req, err := api.ParseTranscriptionRequest(ct, body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := NewTranscription(target, req).RequestBody(); err != nil {
			b.Fatal(err)
		}
	}
}
