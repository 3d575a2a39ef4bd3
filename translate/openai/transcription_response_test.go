package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/translatetest"
)

const recordedTranscription = recorded + "audio/audio-transcription-basic.bodies/00.response.json"

// newTranscriptionTr parses a form asking for format and returns the
// translator for a server with these quirks.
func newTranscriptionTr(t testing.TB, q Quirks, format string) translate.Translator {
	t.Helper()
	fields := []field{file("speech.mp3", "audio/mpeg", mp3), text("model", "whisper-1")}
	if format != "" {
		fields = append(fields, text("response_format", format))
	}
	ct, body := encodeForm(t, fields...)
	req, err := api.ParseTranscriptionRequest(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewCompatibleTranscription(q)(translate.Target{Provider: "openai", Model: "whisper-1", APIKey: "sk"}, req)
	if _, err := tr.RequestBody(); err != nil {
		t.Fatal(err)
	}
	return tr
}

// respond plays one buffered upstream answer through tr.
func respond(t testing.TB, tr translate.Translator, status int, contentType string, body []byte) (translate.Head, []byte) {
	t.Helper()
	head := tr.ResponseHeaders(status, contentType)
	out, err := tr.ResponseBody(body, true)
	if err != nil {
		t.Fatalf("ResponseBody: %v", err)
	}
	return head, out
}

func TestTranscriptionGolden(t *testing.T) {
	groq := CompatibleProviders()["groq"]
	verbose := "testdata/transcription/upstream-verbose.json"
	groqVerbose := "testdata/transcription/upstream-verbose-groq.json"
	tests := []struct {
		name, format string
		quirks       Quirks
		upstream     string
		schema       string
	}{
		{"recorded.json", "json", Quirks{}, recordedTranscription, "CreateTranscriptionResponseJson"},
		{"recorded.txt", "text", Quirks{TranscriptionFormats: []string{"json"}}, recordedTranscription, ""},
		{"verbose.json", "verbose_json", Quirks{}, verbose, "CreateTranscriptionResponseVerboseJson"},
		{"groq-verbose.json", "verbose_json", groq, groqVerbose, "CreateTranscriptionResponseVerboseJson"},
		{"groq-verbose-as.json", "json", groq, groqVerbose, "CreateTranscriptionResponseJson"},
		{"verbose.srt", "srt", groq, verbose, ""},
		{"verbose.vtt", "vtt", groq, verbose, ""},
		{"groq.srt", "srt", groq, groqVerbose, ""},
		{"groq.vtt", "vtt", groq, groqVerbose, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTranscriptionTr(t, tt.quirks, tt.format)
			head, out := respond(t, tr, 200, "application/json", translatetest.ReadFile(t, tt.upstream))
			if want := transcriptionContentType(tt.format); head != (translate.Head{Status: 200, ContentType: want}) {
				t.Errorf("head = %+v, want content type %q", head, want)
			}
			if tt.schema != "" {
				spec.ValidateT(t, tt.schema, out)
				var indented bytes.Buffer
				json.Indent(&indented, out, "", "  ")
				out = append(indented.Bytes(), '\n')
			}
			translatetest.Golden(t, filepath.Join("testdata", "transcription", tt.name), out)
		})
	}
}

func TestTranscriptionContentTypes(t *testing.T) {
	for format, want := range map[string]string{"json": "application/json", "verbose_json": "application/json",
		"diarized_json": "application/json", "text": "text/plain; charset=utf-8", "srt": "text/plain; charset=utf-8",
		"vtt": "text/plain; charset=utf-8"} {
		if got := transcriptionContentType(format); got != want {
			t.Errorf("%s: %q, want %q", format, got, want)
		}
	}
}

// A server answering in the client's own text format passes unchanged;
// a JSON answer where text was asked for (a server ignoring
// response_format) is converted all the same.
func TestTranscriptionTextFormats(t *testing.T) {
	srt := "1\n00:00:00,000 --> 00:00:03,320\nThe sun rises.\n\n"
	tests := []struct {
		name, format, upstreamType, upstream, want string
	}{
		{"srt passes", "srt", "text/plain; charset=utf-8", srt, srt},
		{"text passes", "text", "text/plain", "The sun rises.\n", "The sun rises.\n"},
		{"json where text was asked", "text", "application/json", `{"text":"The sun rises."}`, "The sun rises.\n"},
		{"json without segments where vtt was asked", "vtt", "application/json", `{"text":" The sun rises. ","duration":2.5}`,
			"WEBVTT\n\n00:00:00.000 --> 00:00:02.500\nThe sun rises.\n\n"},
		{"text where json was asked", "json", "text/plain", "The sun rises.\n", `{"text":"The sun rises."}`},
		{"empty transcript", "srt", "application/json", `{"text":""}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out := respond(t, newTranscriptionTr(t, Quirks{}, tt.format), 200, tt.upstreamType, []byte(tt.upstream))
			if string(out) != tt.want {
				t.Errorf("got %q, want %q", out, tt.want)
			}
		})
	}
}

func TestTranscriptionUsage(t *testing.T) {
	tests := []struct {
		name, body string
		usage      translate.Usage
		wantUsage  string // the usage member the client gets; "" for none
	}{
		{"duration", `{"text":"x","usage":{"type":"duration","seconds":7}}`, translate.Usage{AudioSeconds: 7}, `{"seconds":7,"type":"duration"}`},
		{"tokens", `{"text":"x","usage":{"type":"tokens","input_tokens":14,"input_token_details":{"text_tokens":0,"audio_tokens":14},"output_tokens":45,"total_tokens":59}}`,
			translate.Usage{PromptTokens: 14, CompletionTokens: 45, TotalTokens: 59},
			`{"input_token_details":{"text_tokens":0,"audio_tokens":14},"input_tokens":14,"output_tokens":45,"total_tokens":59,"type":"tokens"}`},
		{"tokens without total", `{"text":"x","usage":{"type":"tokens","input_tokens":3,"output_tokens":4}}`,
			translate.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, `{"input_tokens":3,"output_tokens":4,"total_tokens":7,"type":"tokens"}`},
		{"mistral chat-style", `{"model":"voxtral","text":"x","language":"en","usage":{"prompt_audio_seconds":7,"prompt_tokens":110,"total_tokens":135,"completion_tokens":25}}`,
			translate.Usage{PromptTokens: 110, CompletionTokens: 25, TotalTokens: 135, AudioSeconds: 7}, `{"input_tokens":110,"output_tokens":25,"total_tokens":135,"type":"tokens"}`},
		{"unknown shape", `{"text":"x","usage":{"credits":3}}`, translate.Usage{}, ""},
		{"null", `{"text":"x","usage":null,"x_groq":{"id":"req_1"}}`, translate.Usage{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTranscriptionTr(t, Quirks{}, "json")
			_, out := respond(t, tr, 200, "application/json", []byte(tt.body))
			spec.ValidateT(t, "CreateTranscriptionResponseJson", out)
			var got struct {
				Usage json.RawMessage `json:"usage"`
			}
			json.Unmarshal(out, &got)
			if string(got.Usage) != tt.wantUsage {
				t.Errorf("client usage %s, want %s", got.Usage, tt.wantUsage)
			}
			if tr.Usage() != tt.usage {
				t.Errorf("recorded %+v, want %+v", tr.Usage(), tt.usage)
			}
		})
	}
}

// The audio seconds a transcription records are its usage's seconds,
// else the duration of a verbose_json answer (Groq's has no usage), and
// none when the answer says neither; the format asked of the server stays
// the client's (or the one the gateway renders from).
func TestTranscriptionAudioSeconds(t *testing.T) {
	groq := CompatibleProviders()["groq"]
	tests := []struct {
		name, format string
		quirks       Quirks
		contentType  string
		body         []byte
		want         float64
	}{
		{"recorded json: usage.seconds", "json", Quirks{}, "application/json", translatetest.ReadFile(t, recordedTranscription), 7},
		{"verbose_json: usage.seconds over duration", "verbose_json", Quirks{}, "application/json",
			translatetest.ReadFile(t, "testdata/transcription/upstream-verbose.json"), 7},
		{"verbose_json without usage: duration", "verbose_json", groq, "application/json",
			translatetest.ReadFile(t, "testdata/transcription/upstream-verbose-groq.json"), 7.02},
		{"srt rendered from verbose_json: duration", "srt", groq, "application/json",
			translatetest.ReadFile(t, "testdata/transcription/upstream-verbose-groq.json"), 7.02},
		{"json answered verbose: duration", "json", Quirks{}, "application/json", []byte(`{"text":"x","duration":3.5}`), 3.5},
		{"json without usage", "json", Quirks{}, "application/json", []byte(`{"text":"x"}`), 0},
		{"tokens usage only", "json", Quirks{}, "application/json",
			[]byte(`{"text":"x","usage":{"type":"tokens","input_tokens":3,"output_tokens":4,"total_tokens":7}}`), 0},
		{"text as sent", "text", Quirks{}, "text/plain", []byte("x\n"), 0},
		{"negative duration", "verbose_json", groq, "application/json", []byte(`{"text":"x","duration":-2}`), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTranscriptionTr(t, tt.quirks, tt.format)
			respond(t, tr, 200, tt.contentType, tt.body)
			if got := tr.Usage().AudioSeconds; got != tt.want {
				t.Errorf("AudioSeconds = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("stream: done event's duration usage", func(t *testing.T) {
		tr := newTranscriptionTr(t, Quirks{}, "")
		tr.ResponseHeaders(200, "text/event-stream")
		translatetest.Stream(t, tr, [][]byte{[]byte("data: {\"type\":\"transcript.text.done\",\"text\":\"x\",\"usage\":{\"type\":\"duration\",\"seconds\":4}}\n\n")})
		if got := tr.Usage().AudioSeconds; got != 4 {
			t.Errorf("AudioSeconds = %v, want 4", got)
		}
	})
}

func TestTranscriptionProviderErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		body        string
		wantStatus  int
		wantType    string
		wantMessage string
	}{
		{"bad request", 400, `{"error":{"message":"Invalid file format. Supported formats: ['flac', 'm4a', 'mp3']","type":"invalid_request_error","param":null,"code":null}}`,
			400, "invalid_request_error", "Invalid file format. Supported formats: ['flac', 'm4a', 'mp3']"},
		{"groq format", 400, `{"error":{"message":"response_format` + "`" + `srt` + "`" + ` not supported","type":"invalid_request_error"}}`,
			400, "invalid_request_error", "response_format`srt` not supported"},
		{"provider key refused", 401, `{"error":{"message":"Incorrect API key provided: sk-up***"}}`,
			502, "server_error", "The provider rejected the gateway's credentials for this backend."},
		{"html", 503, "<html>busy</html>", 503, "server_error", "The provider returned HTTP 503 Service Unavailable."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head, out := respond(t, newTranscriptionTr(t, Quirks{}, "srt"), tt.status, "application/json", []byte(tt.body))
			if head.Status != tt.wantStatus || head.ContentType != "application/json" {
				t.Errorf("head = %+v", head)
			}
			spec.ValidateT(t, "ErrorResponse", out)
			var e struct{ Error api.ErrorObject }
			json.Unmarshal(out, &e)
			if e.Error.Type != tt.wantType || e.Error.Message != tt.wantMessage {
				t.Errorf("error = %+v", e.Error)
			}
		})
	}
}

// Answers the gateway cannot make a transcription of are errors, for the
// server to turn into a 5xx.
func TestTranscriptionUnusableAnswers(t *testing.T) {
	for _, tt := range []struct{ format, contentType, body string }{
		{"json", "application/json", `[1,2]`},
		{"json", "application/json", `{"transcript":"x"}`},
		{"srt", "application/json", `{"text":7}`},
		{"verbose_json", "text/plain", "hello"},
	} {
		tr := newTranscriptionTr(t, Quirks{}, tt.format)
		tr.ResponseHeaders(200, tt.contentType)
		if out, err := tr.ResponseBody([]byte(tt.body), true); err == nil {
			t.Errorf("%s from %s %q = %q, want an error", tt.format, tt.contentType, tt.body, out)
		}
	}
}

// A streamed transcription (gpt-4o-transcribe with stream=true) passes
// through as sent, chunk by chunk; its usage comes from the done event.
func TestTranscriptionStream(t *testing.T) {
	stream := "data: {\"type\":\"transcript.text.delta\",\"delta\":\"The sun\"}\n\n" +
		"data: {\"type\":\"transcript.text.delta\",\"delta\":\" rises.\"}\n\n" +
		"data: {\"type\":\"transcript.text.done\",\"text\":\"The sun rises.\",\"usage\":{\"type\":\"tokens\",\"input_tokens\":14,\"output_tokens\":5,\"total_tokens\":19}}\n\n"
	tr := newTranscriptionTr(t, Quirks{}, "")
	head := tr.ResponseHeaders(200, "text/event-stream")
	if !head.Stream || head.ContentType != "text/event-stream; charset=utf-8" {
		t.Fatalf("head = %+v", head)
	}
	var chunks [][]byte
	for i := 0; i < len(stream); i += 7 {
		chunks = append(chunks, []byte(stream[i:min(i+7, len(stream))]))
	}
	out := translatetest.Stream(t, tr, chunks)
	if string(out) != stream {
		t.Errorf("stream changed:\n%s", out)
	}
	spec.ValidateSSE(t, "CreateTranscriptionResponseStreamEvent", out)
	if want := (translate.Usage{PromptTokens: 14, CompletionTokens: 5, TotalTokens: 19}); tr.Usage() != want {
		t.Errorf("usage = %+v, want %+v", tr.Usage(), want)
	}
}

var (
	srtCue = regexp.MustCompile(`^(\d+)\n(\d\d):(\d\d):(\d\d),(\d\d\d) --> (\d\d):(\d\d):(\d\d),(\d\d\d)\n((?:[^\n]+\n?)+)$`)
	vttCue = regexp.MustCompile(`^(\d\d):(\d\d):(\d\d)\.(\d\d\d) --> (\d\d):(\d\d):(\d\d)\.(\d\d\d)\n((?:[^\n]+\n?)+)$`)
)

// parsedCue is a cue read back from rendered subtitles.
type parsedCue struct {
	Start, End int64 // milliseconds
	Text       string
}

// parseSubtitles reads SRT or WebVTT the way a player would: cues are
// separated by blank lines, and each must have the format's timing line.
func parseSubtitles(format string, b []byte) ([]parsedCue, error) {
	s := string(b)
	if format == "vtt" {
		var ok bool
		if s, ok = strings.CutPrefix(s, "WEBVTT\n\n"); !ok {
			return nil, fmt.Errorf("no WEBVTT header")
		}
	}
	if s == "" {
		return nil, nil
	}
	body, ok := strings.CutSuffix(s, "\n\n")
	if !ok {
		return nil, fmt.Errorf("the last cue does not end in a blank line")
	}
	ms := func(h, m, sec, milli string) int64 {
		var hh, mm, ss, mmm int64
		fmt.Sscan(h, &hh)
		fmt.Sscan(m, &mm)
		fmt.Sscan(sec, &ss)
		fmt.Sscan(milli, &mmm)
		return ((hh*60+mm)*60+ss)*1000 + mmm
	}
	var out []parsedCue
	for i, block := range strings.Split(body, "\n\n") {
		if format == "srt" {
			m := srtCue.FindStringSubmatch(block)
			if m == nil || m[1] != fmt.Sprint(i+1) {
				return nil, fmt.Errorf("cue %d is not SRT: %q", i+1, block)
			}
			out = append(out, parsedCue{ms(m[2], m[3], m[4], m[5]), ms(m[6], m[7], m[8], m[9]), m[10]})
			continue
		}
		m := vttCue.FindStringSubmatch(block)
		if m == nil {
			return nil, fmt.Errorf("cue %d is not WebVTT: %q", i+1, block)
		}
		out = append(out, parsedCue{ms(m[1], m[2], m[3], m[4]), ms(m[5], m[6], m[7], m[8]), m[9]})
	}
	return out, nil
}

// The rendered subtitles read back as the segments they came from.
func TestSubtitlesReadBack(t *testing.T) {
	segs := []api.Cue{{Start: 0, End: 3.3195, Text: " The sun rises.\r\n"}, {Start: 3.3195, End: 1.0, Text: "Ends before it starts."}, {Start: -2, End: 5e9, Text: "  "},
		{Start: 7.0005, End: 3723.25, Text: "Line one\n\n\nline two --> --->"}}
	want := []parsedCue{{0, 3320, "The sun rises."}, {3320, 3320, "Ends before it starts."},
		{7001, 3723250, "Line one\nline two -> ->"}}
	for _, format := range []string{"srt", "vtt"} {
		render := api.AppendSRT
		if format == "vtt" {
			render = api.AppendVTT
		}
		got, err := parseSubtitles(format, render(nil, segs))
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s cues (-want +got):\n%s", format, diff)
		}
	}
}

// FuzzParseTranscriptionRequest: no panics, only *RequestError, and the
// multipart parser never accepts a body that mime/multipart reads
// differently. An accepted request re-encodes to a form mime/multipart
// reads back with the same fields and file bytes.
func FuzzParseTranscriptionRequest(f *testing.F) {
	ct, body := encodeForm(f, text("model", "whisper-1"), file("a.mp3", "audio/mpeg", mp3[:16]),
		text("response_format", "verbose_json"), text("timestamp_granularities[]", "word"))
	_, params, _ := mime.ParseMediaType(ct)
	f.Add(body, params["boundary"])
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=model\r\n\r\nm\r\n--b\r\nContent-Disposition: form-data; name=file; filename=x.wav\r\n\r\nRIFF\r\n--b--"), "b")
	f.Add([]byte("preamble\r\n--b \r\nContent-Disposition: form-data; name=\"file\"; filename*=UTF-8''%E2%82%AC.ogg\r\n\r\n--b\r\n\r\n--bX\r\n--b--\r\nepilogue"), "b")
	f.Fuzz(func(t *testing.T, data []byte, boundary string) {
		req, err := api.ParseTranscriptionRequest(mime.FormatMediaType("multipart/form-data", map[string]string{"boundary": boundary}), data)
		var re *api.RequestError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("error %v is not a *RequestError", err)
		}
		if err != nil {
			return
		}
		up, err := NewCompatibleTranscription(CompatibleProviders()["groq"])(translate.Target{Provider: "groq", Model: "up"}, req).RequestBody()
		if err != nil {
			t.Fatal(err)
		}
		got := decodeForm(t, up.Headers[0].Value, up.Body)
		var files int
		for _, g := range got {
			if g.Name == "file" {
				files++
				if g.Value != string(req.File.Data) || g.Filename != req.File.Filename {
					t.Fatalf("file changed: %q %q", g.Filename, g.Value)
				}
			}
			if g.Name == "model" && g.Value != "up" {
				t.Fatalf("model = %q", g.Value)
			}
		}
		if files != 1 || len(got) < len(req.Fields)+1 {
			t.Fatalf("upstream form has %d files and %d fields; request had %d fields", files, len(got), len(req.Fields))
		}
	})
}

// FuzzSubtitles renders srt and vtt from arbitrary verbose_json answers:
// no panics, and whatever is rendered reads back as one cue per segment
// with text, in order, with the segment's text.
func FuzzSubtitles(f *testing.F) {
	f.Add(translatetest.ReadFile(f, "testdata/transcription/upstream-verbose.json"))
	f.Add(translatetest.ReadFile(f, "testdata/transcription/upstream-verbose-groq.json"))
	f.Add([]byte(`{"text":"a","segments":[{"start":-1e308,"end":1e308,"text":"x\r\n\r\n-->y"},{"start":"1","text":""}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, format := range []string{"srt", "vtt"} {
			tr := newTranscriptionTr(t, CompatibleProviders()["groq"], format)
			tr.ResponseHeaders(200, "application/json")
			out, err := tr.ResponseBody(body, true)
			if err != nil {
				continue
			}
			got, err := parseSubtitles(format, out)
			if err != nil {
				t.Fatalf("%s does not read back: %v\n%s", format, err, out)
			}
			var m map[string]json.RawMessage
			var text string
			json.Unmarshal(body, &m)
			json.Unmarshal(m["text"], &text)
			var want []string
			for _, c := range cues(m, text) {
				if s := api.CueText(c.Text); s != "" {
					want = append(want, s)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d cues, want %d", format, len(got), len(want))
			}
			for i, c := range got {
				if c.Text != want[i] || c.End < c.Start {
					t.Fatalf("%s cue %d = %+v, want text %q", format, i, c, want[i])
				}
			}
		}
	})
}
