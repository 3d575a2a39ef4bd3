package api

import (
	"bytes"
	"fmt"
	"math"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
)

// TranscriptionRequest is a validated CreateTranscriptionRequest. The
// fields the gateway acts on are parsed; every form field is also kept as
// sent, so that re-encoding for an upstream loses nothing.
type TranscriptionRequest struct {
	Model string
	// File is the audio. Its Data aliases the request body.
	File AudioFile
	// Language and Prompt are empty when absent.
	Language, Prompt string
	// ResponseFormat is as sent, "json" when absent.
	ResponseFormat string
	// Temperature is 0 when absent.
	Temperature float64
	// TimestampGranularities are the timestamp_granularities[] values.
	TimestampGranularities []string
	Stream                 bool

	// Fields are the parts other than the file, in order and as sent;
	// FilePos is how many of them came before it.
	Fields  []FormField
	FilePos int
}

// AudioFile is the uploaded audio.
type AudioFile struct {
	// Filename and ContentType are the part's, as sent (either may be
	// empty).
	Filename, ContentType string
	// Format is the OpenAI format the gateway identified, such as "mp3".
	Format string
	Data   []byte
}

// FormField is one form field other than the file. A field sent as a
// file part (with a filename) is re-sent as a plain field.
type FormField struct {
	Name, Value string
}

// audioFormats are the formats OpenAI transcribes, by file extension.
var audioFormats = []string{"flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"}

// audioContentTypes map a part's content type to the format it names.
var audioContentTypes = map[string]string{
	"audio/flac": "flac", "audio/x-flac": "flac",
	"audio/mpeg": "mp3", "audio/mp3": "mp3", "audio/mpeg3": "mp3", "audio/x-mpeg-3": "mp3", "audio/mpga": "mpga",
	"audio/mp4": "m4a", "audio/m4a": "m4a", "audio/x-m4a": "m4a", "video/mp4": "mp4", "video/mpeg": "mpeg",
	"audio/ogg": "ogg", "audio/opus": "ogg", "application/ogg": "ogg",
	"audio/wav": "wav", "audio/x-wav": "wav", "audio/wave": "wav", "audio/vnd.wave": "wav",
	"audio/webm": "webm", "video/webm": "webm",
}

var responseFormats = []string{"json", "text", "srt", "verbose_json", "vtt", "diarized_json"}

// ParseTranscriptionRequest validates a multipart/form-data
// CreateTranscriptionRequest. Errors are *RequestError: 415 for a content
// type other than multipart/form-data and for a file that is not audio in
// a format OpenAI takes; 400 for everything else, including a
// multipart/form-data content type without a valid boundary and a
// malformed body (the media type is one the endpoint serves; the request
// is what is wrong).
func ParseTranscriptionRequest(contentType string, body []byte) (*TranscriptionRequest, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return nil, &RequestError{Status: http.StatusUnsupportedMediaType, Code: "unsupported_media_type",
			Message: fmt.Sprintf("Unsupported content type %s: this endpoint takes multipart/form-data.", quote(contentType))}
	}
	boundary, ok := params["boundary"]
	if !ok || !validBoundary(boundary) {
		return nil, badMultipart("the content type has no valid boundary parameter (1 to 70 characters, RFC 2046)")
	}
	parts, err := parseMultipart(body, boundary)
	if err != nil {
		return nil, badMultipart(err.Error())
	}
	r := &TranscriptionRequest{ResponseFormat: "json"}
	seen := map[string]bool{}
	haveFile := false
	for _, p := range parts {
		if p.name == "file" {
			if haveFile {
				return nil, invalidValue("file", "expected one file, but got more than one.")
			}
			haveFile = true
			r.FilePos = len(r.Fields)
			r.File = AudioFile{Filename: p.filename, ContentType: p.contentType, Data: p.data}
			continue
		}
		value := string(p.data)
		r.Fields = append(r.Fields, FormField{p.name, value})
		switch name := p.name; name {
		case "model", "language", "prompt", "response_format", "temperature", "stream":
			if seen[name] {
				return nil, invalidValue(name, "expected one value, but got more than one.")
			}
			seen[name] = true
			if err := r.set(name, value); err != nil {
				return nil, err
			}
		case "timestamp_granularities[]", "timestamp_granularities":
			if value != "word" && value != "segment" {
				return nil, invalidValue("timestamp_granularities", "'%s' is not one of ['word', 'segment'].", value)
			}
			r.TimestampGranularities = append(r.TimestampGranularities, value)
		}
	}
	if !haveFile {
		return nil, missing("file")
	}
	if r.Model == "" {
		return nil, missing("model")
	}
	if slices.Contains(r.TimestampGranularities, "word") && r.ResponseFormat != "verbose_json" {
		return nil, invalidValue("timestamp_granularities", "word timestamps need response_format 'verbose_json', but it is '%s'.", r.ResponseFormat)
	}
	if r.File.Format = audioFormat(r.File); r.File.Format == "" {
		return nil, &RequestError{Status: http.StatusUnsupportedMediaType, Param: "file", Code: "unsupported_file_format",
			Message: fmt.Sprintf("Unsupported file format (file name %s, content type %s). Supported formats: %s.",
				quote(r.File.Filename), quote(r.File.ContentType), strings.Join(audioFormats, ", "))}
	}
	return r, nil
}

func (r *TranscriptionRequest) set(name, value string) error {
	switch name {
	case "model":
		r.Model = value
	case "language":
		r.Language = value
	case "prompt":
		r.Prompt = value
	case "response_format":
		if !slices.Contains(responseFormats, value) {
			return invalidValue("response_format", "'%s' is not one of %s.", value, strings.Join(responseFormats, ", "))
		}
		r.ResponseFormat = value
	case "temperature":
		t, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || math.IsNaN(t) {
			return &RequestError{Param: "temperature", Code: "invalid_type",
				Message: fmt.Sprintf("Invalid type for 'temperature': expected a number, but got %s instead.", quote(value))}
		}
		if t < 0 || t > 1 {
			return invalidValue("temperature", "%s is outside the range 0 to 1.", value)
		}
		r.Temperature = t
	case "stream":
		b, err := strconv.ParseBool(strings.TrimSpace(value))
		if err != nil {
			return &RequestError{Param: "stream", Code: "invalid_type",
				Message: fmt.Sprintf("Invalid type for 'stream': expected a boolean, but got %s instead.", quote(value))}
		}
		r.Stream = b
	}
	return nil
}

func badMultipart(reason string) error {
	return &RequestError{Code: "invalid_multipart_body",
		Message: "The request body is not valid multipart/form-data: " + reason + "."}
}

// audioFormat names the OpenAI format of the upload from its file
// extension, its part content type or its first bytes, in that order;
// empty means none of them names a format OpenAI takes.
func audioFormat(f AudioFile) string {
	if ext := strings.ToLower(strings.TrimPrefix(path.Ext(f.Filename), ".")); slices.Contains(audioFormats, ext) {
		return ext
	}
	if mt, _, err := mime.ParseMediaType(f.ContentType); err == nil && audioContentTypes[mt] != "" {
		return audioContentTypes[mt]
	}
	return sniffAudio(f.Data)
}

// sniffAudio recognizes the container signatures of OpenAI's formats.
func sniffAudio(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "flac"
	case bytes.HasPrefix(b, []byte("ID3")):
		return "mp3"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "wav"
	case bytes.HasPrefix(b, []byte("OggS")):
		return "ogg"
	case bytes.HasPrefix(b, []byte{0x1A, 0x45, 0xDF, 0xA3}):
		return "webm"
	case len(b) >= 8 && string(b[4:8]) == "ftyp":
		return "mp4"
	case bytes.HasPrefix(b, []byte{0, 0, 1, 0xBA}):
		return "mpeg"
	case len(b) >= 2 && b[0] == 0xFF && b[1]&0xE0 == 0xE0 && b[1]&0x06 != 0:
		// An MPEG audio frame header (layer bits not 00, which is AAC's ADTS).
		return "mp3"
	}
	return ""
}
