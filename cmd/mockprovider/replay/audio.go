package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
)

// audioRoutes registers the mock's audio endpoints: mux routes for paths of
// their own, s.methods entries for operations on shared routes.
//
// Transcriptions are served on OpenAI's /v1/audio/transcriptions, Azure
// OpenAI's deployment path (api-version required) and Groq's
// /openai/v1/audio/transcriptions, which like Groq refuses srt and vtt.
// The request is read like a provider reads it: a multipart form with a
// file and a model, or a 400. The json answer replays the recording
// openai/audio/audio-transcription-basic byte for byte; the model
// mock-error-400 replays a recorded 400.
//
// Only that json answer was recorded. The other formats are made by the
// mock, in OpenAI's documented shapes, from the recorded text: it is cut
// into sentences whose segment timings are spread over the recorded
// duration in proportion to their length (and words likewise within their
// sentence). The timings are plausible, not what Whisper would measure.
func (s *Server) audioRoutes() {
	openaiFormats := []string{"json", "text", "srt", "verbose_json", "vtt"}
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/v1/audio/transcriptions", s.transcription(openaiFormats))
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/openai/v1/audio/transcriptions", s.transcription([]string{"json", "text", "verbose_json"}))
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/openai/deployments/{deployment}/audio/transcriptions", azureDeployment(s.transcription(openaiFormats)))
}

// transcription serves a transcription endpoint that answers in formats.
func (s *Server) transcription(formats []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Could not parse multipart form: "+err.Error())
			return
		}
		defer r.MultipartForm.RemoveAll() //nolint:errcheck // temporary files only
		if len(r.MultipartForm.File["file"]) != 1 {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Missing required parameter: 'file'.")
			return
		}
		model := r.FormValue("model")
		if model == "" {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "", "Missing required parameter: 'model'.")
			return
		}
		format := r.FormValue("response_format")
		if format == "" {
			format = "json"
		}
		if !slices.Contains(formats, format) {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "",
				fmt.Sprintf("response_format `%s` is not supported: use one of %s", format, strings.Join(formats, ", ")))
			return
		}
		dir := "openai/audio/audio-transcription-basic.bodies"
		if model == "mock-error-400" {
			dir = "openai/errors/chat-bad-request.bodies"
		}
		rec, err := s.load(dir)
		if err == nil && format != "json" && model != "mock-error-400" {
			rec, err = transcriptionAs(rec, format, r.MultipartForm.Value["timestamp_granularities[]"])
		}
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
			return
		}
		s.replay(w, rec)
	}
}

type mockSegment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type mockWord struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// transcriptionAs derives a response format from the recorded json answer
// (see audioRoutes): text, verbose_json (with words when asked), srt, vtt.
func transcriptionAs(rec recording, format string, granularities []string) (recording, error) {
	var resp struct {
		Text  string `json:"text"`
		Usage struct {
			Seconds float64 `json:"seconds"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(rec.body, &resp); err != nil {
		return rec, err
	}
	duration := resp.Usage.Seconds
	var sentences []string
	for rest := resp.Text; rest != ""; {
		i := strings.IndexAny(rest, ".?!")
		if i < 0 {
			i = len(rest) - 1
		}
		sentences = append(sentences, strings.TrimSpace(rest[:i+1]))
		rest = strings.TrimSpace(rest[i+1:])
	}
	var segments []mockSegment
	var words []mockWord
	at := func(chars, total int) float64 { return math.Round(duration*float64(chars)/float64(total)*100) / 100 }
	done := 0
	for i, sentence := range sentences {
		seg := mockSegment{ID: i, Start: at(done, len(resp.Text)), End: at(done+len(sentence), len(resp.Text)),
			Text: " " + sentence, Tokens: []int{}, AvgLogprob: -0.21, CompressionRatio: 1.24, NoSpeechProb: 0.01}
		segments = append(segments, seg)
		wordDone := 0
		for _, w := range strings.Fields(sentence) {
			words = append(words, mockWord{Word: strings.Trim(w, ".,?!"),
				Start: at(done+wordDone, len(resp.Text)), End: at(done+wordDone+len(w), len(resp.Text))})
			wordDone += len(w) + 1
		}
		done += len(sentence) + 1
	}
	out := recording{status: rec.status, contentType: "text/plain; charset=utf-8"}
	switch format {
	case "text":
		out.body = []byte(resp.Text + "\n")
	case "srt", "vtt":
		var b strings.Builder
		if format == "vtt" {
			b.WriteString("WEBVTT\n\n")
		}
		for i, seg := range segments {
			if format == "srt" {
				fmt.Fprintf(&b, "%d\n", i+1)
			}
			fmt.Fprintf(&b, "%s --> %s\n%s\n\n", subtitleTime(seg.Start, format), subtitleTime(seg.End, format), strings.TrimSpace(seg.Text))
		}
		out.body = []byte(b.String())
	case "verbose_json":
		v := map[string]any{"task": "transcribe", "language": "english", "duration": duration, "text": resp.Text,
			"usage": map[string]any{"type": "duration", "seconds": math.Ceil(duration)}}
		// As OpenAI does: segments unless only word timestamps were asked
		// for, words when they were.
		if !slices.Equal(granularities, []string{"word"}) {
			v["segments"] = segments
		}
		if slices.Contains(granularities, "word") {
			v["words"] = words
		}
		body, err := json.Marshal(v)
		if err != nil {
			return rec, err
		}
		out.contentType, out.body = "application/json", body
	}
	return out, nil
}

// subtitleTime is HH:MM:SS,mmm (srt) or HH:MM:SS.mmm (vtt).
func subtitleTime(seconds float64, format string) string {
	ms := int64(math.Round(seconds * 1000))
	sep := ","
	if format == "vtt" {
		sep = "."
	}
	return fmt.Sprintf("%02d:%02d:%02d%s%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}
