package openai

import (
	"bytes"
	"encoding/json"
	"mime"
	"slices"
	"strings"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/jsonscan"
	"modelgate/translate/sse"
)

// transcription translates /v1/audio/transcriptions for servers that
// speak OpenAI's API. The request is re-encoded with the upstream model;
// the response is made to match what OpenAI answers for the format the
// client asked for, rendering it from another format where the server
// lacks it.
type transcription struct {
	report translate.Output // what the last ResponseBody returned
	target translate.Target
	req    *api.TranscriptionRequest
	ask    string // the response_format asked of the server
	// boundary is the form's boundary, chosen once: RequestBody gives the
	// same bytes however often it is called.
	boundary string
	status   int
	json     bool // the server answered JSON
	html     bool // the server answered an HTML page (a proxy's)
	stream   bool
	dec      sse.Decoder
	whole    sse.Whole // the relayed stream, in whole events
	usage    translate.Usage
	seconds  float64 // the seconds of the answer's usage, zero without
}

// NewCompatibleTranscription returns the transcription translator
// constructor for a server with these quirks.
func NewCompatibleTranscription(q Quirks) func(translate.Target, *api.TranscriptionRequest) translate.Translator {
	return func(t translate.Target, req *api.TranscriptionRequest) translate.Translator {
		return &transcription{target: t, req: req, ask: q.transcriptionFormat(req.ResponseFormat), boundary: newBoundary()}
	}
}

// transcriptionFormat is the response_format to ask a server for when the
// client wants want.
func (q Quirks) transcriptionFormat(want string) string {
	has := func(f string) bool {
		return q.TranscriptionFormats == nil || slices.Contains(q.TranscriptionFormats, f)
	}
	switch {
	case has(want):
		return want
	case (want == "srt" || want == "vtt") && has("verbose_json"):
		return "verbose_json"
	case want == "text" && has("json"):
		return "json"
	}
	return want
}

// fileContentTypes name the upload's content type for a part sent without
// one (RFC 7578 would read that as text/plain).
var fileContentTypes = map[string]string{
	"flac": "audio/flac", "mp3": "audio/mpeg", "mpga": "audio/mpeg", "mp4": "audio/mp4", "m4a": "audio/mp4",
	"mpeg": "video/mpeg", "ogg": "audio/ogg", "wav": "audio/wav", "webm": "audio/webm",
}

// RequestBody re-encodes the form with the translator's boundary: the upstream
// model, the response_format asked of the server, the file bytes and
// every other field as sent. When the gateway renders the format itself
// it leaves out stream: it needs the whole answer.
func (c *transcription) RequestBody() (translate.Upstream, error) {
	r := c.req
	converting := c.ask != r.ResponseFormat
	size := len(r.File.Data) + len(r.File.Filename) + len(r.File.ContentType) + len(c.target.Model) + 2*partOverhead
	for _, f := range r.Fields {
		size += len(f.Name) + len(f.Value) + partOverhead
	}
	w := newFormWriter(size, c.boundary)
	file := func() {
		ct := r.File.ContentType
		if ct == "" {
			ct = fileContentTypes[r.File.Format]
		}
		w.file("file", r.File.Filename, ct, r.File.Data)
	}
	askSent := false
	for i, f := range r.Fields {
		if i == r.FilePos {
			file()
		}
		switch f.Name {
		case "model":
			f.Value = c.target.Model
		case "response_format":
			f.Value, askSent = c.ask, true
		case "stream":
			if converting {
				continue
			}
		}
		w.field(f.Name, f.Value)
	}
	if r.FilePos == len(r.Fields) {
		file()
	}
	if !askSent && c.ask != "json" {
		w.field("response_format", c.ask)
	}
	body, contentType, err := w.close()
	if err != nil {
		return translate.Upstream{}, err
	}
	return upstream(c.target, "/v1/audio/transcriptions", contentType, body), nil
}

// transcriptionContentType is OpenAI's content type for a response
// format: JSON for the JSON formats, text/plain for text, srt and vtt
// alike (OpenAI does not send text/vtt or application/x-subrip).
func transcriptionContentType(format string) string {
	switch format {
	case "text", "srt", "vtt":
		return "text/plain; charset=utf-8"
	}
	return "application/json"
}

// ResponseHeaders passes event streams through and answers everything
// else in the client's format.
func (c *transcription) ResponseHeaders(status int, contentType string) translate.Head {
	c.status = status
	if status < 200 || status >= 300 {
		return translate.Head{Status: api.ClientStatus(status), ContentType: "application/json"}
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		c.stream = true
		return translate.Head{Status: status, ContentType: "text/event-stream; charset=utf-8", Stream: true}
	}
	c.json = mt == "application/json" || strings.HasSuffix(mt, "+json")
	c.html = mt == "text/html"
	return translate.Head{Status: status, ContentType: transcriptionContentType(c.req.ResponseFormat)}
}

var errNotTranscription = api.Unusable("the provider's transcription is not a JSON object with a text member")

// ResponseBody implements translate.Translator, and reports what it
// returns.
func (c *transcription) ResponseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := c.translated(chunk, endOfStream)
	c.report.Later(translate.Transcription, out, c.status, c.stream)
	return out, err
}

// Output implements translate.Reporter.
func (c *transcription) Output() *translate.Output { return c.report.Scanned() }

// translated converts the answer by what the server sent (not only by
// what it was asked for: some servers ignore response_format). A JSON
// answer that is no transcription, a plain-text answer where verbose JSON
// is due, and an HTML page are errors wrapping translate.ErrUpstream. An
// empty plain-text answer (for the text, srt and vtt formats, or json
// made from text) is an empty transcript, as for silent audio, and passes.
func (c *transcription) translated(chunk []byte, endOfStream bool) ([]byte, error) {
	out, err := c.responseBody(chunk, endOfStream)
	return out, api.AsUnusable(err)
}

func (c *transcription) responseBody(chunk []byte, endOfStream bool) ([]byte, error) {
	if c.stream {
		c.scanStream(chunk)
		return c.whole.Cut(chunk, endOfStream), nil // relayed in whole events
	}
	if c.status < 200 || c.status >= 300 {
		return api.ProviderError(c.status, chunk), nil
	}
	want := c.req.ResponseFormat
	if c.html {
		return nil, api.Unusable("the provider answered an HTML page")
	}
	if !c.json {
		switch want {
		case "json":
			return api.Marshal(map[string]string{"text": strings.TrimSuffix(string(chunk), "\n")})
		case "verbose_json", "diarized_json":
			return nil, errNotTranscription
		}
		return chunk, nil
	}
	m, text, err := c.transcript(chunk)
	if err != nil {
		return nil, err
	}
	switch want {
	case "json":
		keepOnly(m, "text", "usage", "logprobs", "languages")
		return api.Marshal(m)
	case "verbose_json":
		c.verbose(m)
		return api.Marshal(m)
	case "text":
		return []byte(text + "\n"), nil
	case "srt":
		return api.AppendSRT(nil, cues(m, text)), nil
	case "vtt":
		return api.AppendVTT(nil, cues(m, text)), nil
	}
	return chunk, nil // diarized_json: passed as sent
}

// transcript reads a JSON transcription: its members without nulls (the
// schema allows none), its text, and its usage, normalized to one of the
// schema's two shapes and recorded. The audio seconds recorded are the
// usage's, else the duration member of a verbose answer.
func (c *transcription) transcript(body []byte) (map[string]json.RawMessage, string, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, "", errNotTranscription
	}
	for k, v := range m {
		if jsonscan.IsNull(v) {
			delete(m, k)
		}
	}
	var text string
	if json.Unmarshal(m["text"], &text) != nil {
		return nil, "", errNotTranscription
	}
	if raw, ok := m["usage"]; ok {
		var u json.RawMessage
		u, c.usage, c.seconds = transcriptUsage(raw)
		if u == nil {
			delete(m, "usage")
		} else {
			m["usage"] = u
		}
	}
	c.usage.AudioSeconds = c.seconds
	var duration float64
	if c.seconds <= 0 && json.Unmarshal(m["duration"], &duration) == nil {
		c.usage.AudioSeconds = duration
	}
	c.usage.AudioSeconds = max(c.usage.AudioSeconds, 0)
	return m, text, nil
}

func keepOnly(m map[string]json.RawMessage, names ...string) {
	for k := range m {
		if !slices.Contains(names, k) {
			delete(m, k)
		}
	}
}

// verbose makes m a valid CreateTranscriptionResponseVerboseJson: the
// required language and duration are filled in when a server leaves them
// out, segments get the members the schema requires, and vendor members
// (Groq's x_groq) are dropped.
func (c *transcription) verbose(m map[string]json.RawMessage) {
	keepOnly(m, "task", "language", "duration", "text", "words", "segments", "usage")
	var usage struct{ Type string }
	if json.Unmarshal(m["usage"], &usage) != nil || usage.Type != "duration" {
		delete(m, "usage") // the verbose schema has only duration usage
	}
	segs := verboseSegments(m["segments"])
	if segs == nil {
		delete(m, "segments")
	} else {
		m["segments"], _ = api.Marshal(segs)
	}
	if words := verboseWords(m["words"]); words == nil {
		delete(m, "words")
	} else {
		m["words"], _ = api.Marshal(words)
	}
	var lang string
	if json.Unmarshal(m["language"], &lang) != nil {
		m["language"], _ = api.Marshal(c.req.Language)
	}
	var duration float64
	if json.Unmarshal(m["duration"], &duration) != nil {
		switch {
		case c.seconds > 0:
			duration = c.seconds
		case len(segs) > 0:
			duration = segs[len(segs)-1].End
		}
		m["duration"], _ = json.Marshal(duration)
	}
	var task string
	if json.Unmarshal(m["task"], &task) != nil {
		delete(m, "task")
	}
}

// segment is a TranscriptionSegment with every required member.
type segment struct {
	ID               int64   `json:"id"`
	Seek             int64   `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int64 `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

// verboseSegments reads segments member by member, so that one member of
// the wrong type (a string id, null tokens) costs that member, not the
// segment; a missing id is the segment's index. Nil means no segments.
func verboseSegments(raw json.RawMessage) []segment {
	var in []map[string]json.RawMessage
	if json.Unmarshal(raw, &in) != nil || in == nil {
		return nil
	}
	out := make([]segment, 0, len(in))
	for i, m := range in {
		// A member that does not decode leaves the default in place.
		s := segment{ID: int64(i)}
		json.Unmarshal(m["id"], &s.ID)
		json.Unmarshal(m["seek"], &s.Seek)
		json.Unmarshal(m["start"], &s.Start)
		s.End = s.Start
		json.Unmarshal(m["end"], &s.End)
		json.Unmarshal(m["text"], &s.Text)
		if json.Unmarshal(m["tokens"], &s.Tokens) != nil || s.Tokens == nil {
			s.Tokens = []int64{}
		}
		json.Unmarshal(m["temperature"], &s.Temperature)
		json.Unmarshal(m["avg_logprob"], &s.AvgLogprob)
		json.Unmarshal(m["compression_ratio"], &s.CompressionRatio)
		json.Unmarshal(m["no_speech_prob"], &s.NoSpeechProb)
		out = append(out, s)
	}
	return out
}

type word struct {
	Word  string  `json:"word"`
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// verboseWords keeps the words that have a word and numeric times.
func verboseWords(raw json.RawMessage) []word {
	var in []json.RawMessage
	if json.Unmarshal(raw, &in) != nil || in == nil {
		return nil
	}
	out := make([]word, 0, len(in))
	for _, r := range in {
		var w struct {
			Word       *string
			Start, End *float64
		}
		if json.Unmarshal(r, &w) == nil && w.Word != nil && w.Start != nil && w.End != nil {
			out = append(out, word{*w.Word, *w.Start, *w.End})
		}
	}
	return out
}

// cues are the subtitle cues of a transcription: its segments, or else
// the whole text as one cue over the audio's duration.
func cues(m map[string]json.RawMessage, text string) []api.Cue {
	if segs := verboseSegments(m["segments"]); len(segs) > 0 {
		out := make([]api.Cue, len(segs))
		for i, s := range segs {
			out[i] = api.Cue{Start: s.Start, End: s.End, Text: s.Text}
		}
		return out
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	var duration float64
	json.Unmarshal(m["duration"], &duration) //nolint:errcheck // zero without one
	return []api.Cue{{Start: 0, End: duration, Text: text}}
}

// transcriptUsage normalizes a transcription's usage to the schema's
// token or duration shape (nil when it is neither and cannot be made one)
// and returns what is recorded. Token usage is recorded as prompt
// (input), completion (output) and total tokens. Duration usage records
// no tokens; its seconds are returned for AudioSeconds, as are Mistral's
// prompt_audio_seconds. Mistral's chat-style usage (prompt_tokens,
// completion_tokens) becomes token usage.
func transcriptUsage(raw json.RawMessage) (json.RawMessage, translate.Usage, float64) {
	var u struct {
		Type              string          `json:"type"`
		InputTokens       int64           `json:"input_tokens"`
		InputTokenDetails json.RawMessage `json:"input_token_details"`
		OutputTokens      int64           `json:"output_tokens"`
		TotalTokens       int64           `json:"total_tokens"`
		Seconds           float64         `json:"seconds"`
		PromptTokens      *int64          `json:"prompt_tokens"`
		CompletionTokens  int64           `json:"completion_tokens"`
		AudioSeconds      float64         `json:"prompt_audio_seconds"`
	}
	if json.Unmarshal(raw, &u) != nil {
		return nil, translate.Usage{}, 0
	}
	switch {
	case u.Type == "duration":
		out, _ := json.Marshal(map[string]any{"type": "duration", "seconds": u.Seconds})
		return out, translate.Usage{}, u.Seconds
	case u.Type == "" && u.PromptTokens != nil:
		u.Type, u.InputTokens, u.OutputTokens, u.Seconds = "tokens", *u.PromptTokens, u.CompletionTokens, u.AudioSeconds
	case u.Type != "tokens":
		return nil, translate.Usage{}, 0
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.InputTokens + u.OutputTokens
	}
	out := map[string]any{"type": "tokens", "input_tokens": u.InputTokens, "output_tokens": u.OutputTokens, "total_tokens": u.TotalTokens}
	if len(u.InputTokenDetails) > 0 && u.InputTokenDetails[0] == '{' {
		out["input_token_details"] = u.InputTokenDetails
	}
	b, _ := json.Marshal(out)
	return b, translate.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}, u.Seconds
}

// scanStream reads usage from the transcript.text.done event of a
// streamed transcription; the stream itself passes unchanged (its events
// are OpenAI's).
func (c *transcription) scanStream(chunk []byte) {
	for _, ev := range c.dec.Feed(chunk) {
		if !bytes.Contains(ev.Data, []byte("transcript.text.done")) {
			continue
		}
		var done struct {
			Type  string          `json:"type"`
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(ev.Data, &done) == nil && done.Type == "transcript.text.done" && done.Usage != nil {
			_, c.usage, c.seconds = transcriptUsage(done.Usage)
			c.usage.AudioSeconds = max(c.seconds, 0)
		}
	}
}

// Usage implements translate.Translator. AudioSeconds is the answer's
// usage seconds (duration usage, Mistral's prompt_audio_seconds), else
// the duration of a verbose_json answer; zero for answers that state
// neither (text, srt and vtt as the server sent them, json without
// usage). The format asked of the server is not changed to learn it.
func (c *transcription) Usage() translate.Usage { return c.usage }

// NewTranscription returns the transcription translator for OpenAI.
func NewTranscription(t translate.Target, req *api.TranscriptionRequest) translate.Translator {
	return NewCompatibleTranscription(Quirks{})(t, req)
}

var _ translate.Reporter = (*transcription)(nil)
