package translatetest

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"modelgate/translate"
	"modelgate/translate/api"
	"modelgate/translate/api/spec"
	"modelgate/translate/sse"
	"modelgate/translate/translatetest/clienttext"
)

// Endpoint names the OpenAPI component schemas of what one endpoint's
// clients get.
type Endpoint struct {
	// Body is the schema of a JSON answer.
	Body string
	// Event is the schema of each stream event; empty for endpoints that
	// do not stream.
	Event string
}

// The endpoints' client schemas.
var (
	Chat       = Endpoint{Body: "CreateChatCompletionResponse", Event: "CreateChatCompletionStreamResponse"}
	Embeddings = Endpoint{Body: "CreateEmbeddingResponse"}
	Images     = Endpoint{Body: "ImagesResponse"}
	Responses  = Endpoint{Body: "Response", Event: "ResponseStreamEvent"}
)

// Case is one golden case: a client request (request.json in the case's
// folder) and a provider's recorded answer to it.
type Case struct {
	// Name is the case's folder under the test's golden directory.
	Name string
	// Recording is the provider's recorded answer body, a path from the
	// test's package.
	Recording string
	// Status is the recorded status; zero means 200.
	Status int
	// ContentType is the recorded content type.
	ContentType string
}

// RunGoldens plays each case through the translator newTr builds from the
// case's request.json, as the ext_proc server does, and checks:
//
//   - the upstream request matches upstream.json (UpstreamJSON);
//   - what the client gets matches client.json, or client.sse for a
//     stream, and validates against ep's schemas: every body, and every
//     event of a stream, with ErrorResponse for errors;
//   - the usage the translator reports, what the ledger records and
//     prices, matches usage.json;
//   - a stream cut at random points gives the client the same bytes, and
//     the same usage.
//
// -update rewrites upstream.json, the client file and usage.json.
func RunGoldens(t *testing.T, dir string, ep Endpoint, cases []Case, newTr func(t testing.TB, request []byte) translate.Translator) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			caseDir := filepath.Join(dir, tc.Name)
			request := ReadFile(t, filepath.Join(caseDir, "request.json"))
			recording := ReadFile(t, tc.Recording)
			status := tc.Status
			if status == 0 {
				status = http.StatusOK
			}
			tr := newTr(t, request)
			up, err := tr.RequestBody()
			Golden(t, filepath.Join(caseDir, "upstream.json"), UpstreamJSON(t, up, err))
			if err != nil {
				return
			}
			head := tr.ResponseHeaders(status, tc.ContentType)
			if !head.Stream {
				out, err := tr.ResponseBody(recording, true)
				if err != nil {
					t.Fatalf("ResponseBody: %v", err)
				}
				Golden(t, filepath.Join(caseDir, "client.json"), out)
				checkReport(t, ep, tr, out, head.Status >= 400)
				Golden(t, filepath.Join(caseDir, "usage.json"), usageJSON(tr.Usage()))
				schema := ep.Body
				if head.Status >= 400 {
					schema = "ErrorResponse"
				}
				body := out
				if ep == Embeddings {
					body = FloatEmbeddings(t, out)
				}
				spec.ValidateT(t, schema, body)
				if ep == Chat && head.Status < 400 {
					checkUsageShape(t, out)
				}
				return
			}
			if ep.Event == "" {
				t.Fatalf("%s answers a stream to an endpoint that has none", tc.Name)
			}
			out, got := streamOutputs(t, tr, RandomChunks(rand.New(rand.NewPCG(1, 2)), recording, 512))
			if ep == Chat {
				if want := answerText(t, out, true); !maps.Equal(got, want) {
					t.Errorf("reported text %q, the stream's %q", got, want)
				}
			}
			Golden(t, filepath.Join(caseDir, "client.sse"), out)
			Golden(t, filepath.Join(caseDir, "usage.json"), usageJSON(tr.Usage()))
			spec.ValidateSSE(t, ep.Event, out)
			checkChunks(t, ep, out)
			r := rand.New(rand.NewPCG(uint64(len(recording)), 1))
			for range 3 {
				again := newTr(t, request)
				again.RequestBody() //nolint:errcheck // succeeded above
				again.ResponseHeaders(status, tc.ContentType)
				if got := Stream(t, again, RandomChunks(r, recording, 64)); !bytes.Equal(got, out) {
					t.Fatalf("a stream cut at random points gives other bytes:\n%s\nwant:\n%s", got, out)
				}
				if again.Usage() != tr.Usage() {
					t.Fatalf("a stream cut at random points gives other usage: %+v, want %+v", again.Usage(), tr.Usage())
				}
			}
		})
	}
}

// checkChunks requires each chunk of a chat stream to carry a delta, a
// finish reason, the provider's annotations or the usage, in the one
// usage shape: a provider event
// that has nothing for OpenAI clients (an empty thinking delta, a
// reasoning signature) is dropped, not sent as an empty chunk.
func checkChunks(t testing.TB, ep Endpoint, stream []byte) {
	t.Helper()
	if ep != Chat {
		return
	}
	var d sse.Decoder
	for _, ev := range d.Feed(stream) {
		var chunk struct {
			Choices []map[string]json.RawMessage `json:"choices"`
			Usage   json.RawMessage              `json:"usage"`
		}
		if json.Unmarshal(ev.Data, &chunk) != nil || chunk.Usage != nil && string(chunk.Usage) != "null" {
			checkUsageShape(t, ev.Data)
			continue
		}
		for _, c := range chunk.Choices {
			says := string(c["finish_reason"]) != "null" && c["finish_reason"] != nil || len(c["delta"]) > 2
			for k := range c { // a provider's own annotations (Azure's content filter results)
				says = says || k != "index" && k != "delta" && k != "finish_reason" && k != "logprobs"
			}
			if !says {
				t.Errorf("a chunk that says nothing: %s", ev.Data)
			}
		}
	}
}

// checkUsageShape requires a chat completion's or chunk's usage, where it
// has one, to be in the one shape every provider answers with: exactly
// api.Usage's members, in its order.
func checkUsageShape(t testing.TB, body []byte) {
	t.Helper()
	var v struct {
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil || string(v.Usage) == "null" {
		return
	}
	u, err := api.ParseUsage(v.Usage)
	if err != nil {
		t.Errorf("usage %s: %v", v.Usage, err)
		return
	}
	if want, _ := json.Marshal(u); !bytes.Equal(v.Usage, want) {
		t.Errorf("usage is not in the one shape:\n got %s\nwant %s", v.Usage, want)
	}
}

// FloatEmbeddings returns a CreateEmbeddingResponse with its base64
// vectors decoded to numbers: the OpenAPI document types an embedding as
// numbers only, though the API answers encoding_format base64 with a
// string of little-endian float32s. Any other body is returned as it is.
func FloatEmbeddings(t testing.TB, body []byte) []byte {
	t.Helper()
	var resp map[string]json.RawMessage
	var data []map[string]json.RawMessage
	if json.Unmarshal(body, &resp) != nil || json.Unmarshal(resp["data"], &data) != nil {
		return body
	}
	for _, d := range data {
		var b64 string
		if json.Unmarshal(d["embedding"], &b64) != nil {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw)%4 != 0 {
			t.Errorf("embedding %.40s… is not base64 of float32s", b64)
			continue
		}
		floats := make([]float32, len(raw)/4)
		for i := range floats {
			floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		d["embedding"], _ = json.Marshal(floats)
	}
	resp["data"], _ = json.Marshal(data)
	out, _ := json.Marshal(resp)
	return out
}

// usageJSON is a translator's usage as usage.json holds it.
func usageJSON(u translate.Usage) []byte {
	b, _ := json.MarshalIndent(u, "", "  ")
	return append(b, '\n')
}

// reported is the text a translator reported, unquoted, by kind, in
// order: the kind's pieces joined.
type reported map[translate.TextKind]string

// addReport adds what tr reported of out, which must lie in it and
// be whole JSON strings' contents.
func (r reported) add(t testing.TB, tr translate.Translator, out []byte) {
	t.Helper()
	o := tr.Output()
	prev := 0
	for _, x := range o.Texts {
		if x.Start < prev || x.End < x.Start || x.End > len(out) || x.Start == 0 || out[x.Start-1] != '"' || x.End >= len(out) || out[x.End] != '"' {
			t.Fatalf("reported text %+v is not a string's contents in %q", x, out)
		}
		var s string
		if err := json.Unmarshal(out[x.Start-1:x.End+1], &s); err != nil {
			t.Fatalf("reported text %q: %v", out[x.Start-1:x.End+1], err)
		}
		r[x.Kind] += s
		prev = x.End
	}
}

// answerText is the text of a chat answer (a body, or a stream's
// chunks), by kind, as a client reads it.
func answerText(t testing.TB, out []byte, stream bool) reported {
	t.Helper()
	want := reported{}
	for _, d := range clienttext.Docs(out, stream) {
		var c struct {
			Choices []struct {
				Delta, Message *struct {
					Content          *string
					ReasoningContent *string `json:"reasoning_content"`
					Refusal          *string
					ToolCalls        []struct {
						Function struct{ Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if err := json.Unmarshal(d, &c); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for _, ch := range c.Choices {
			m := ch.Delta
			if m == nil {
				m = ch.Message
			}
			if m == nil {
				continue
			}
			for k, s := range map[translate.TextKind]*string{translate.TextAnswer: m.Content, translate.TextReasoning: m.ReasoningContent, translate.TextRefusal: m.Refusal} {
				if s != nil && *s != "" {
					want[k] += *s
				}
			}
			for _, tc := range m.ToolCalls {
				if tc.Function.Arguments != "" {
					want[translate.TextArguments] += tc.Function.Arguments
				}
			}
		}
	}
	return want
}

// streamOutputs is Stream's, with the text the translator reported of
// each output.
func streamOutputs(t testing.TB, tr translate.Translator, chunks [][]byte) ([]byte, reported) {
	t.Helper()
	var out []byte
	got := reported{}
	for i, c := range append(chunks, nil) {
		b, err := tr.ResponseBody(c, i == len(chunks))
		if err != nil {
			t.Fatal(err)
		}
		got.add(t, tr, b)
		out = append(out, b...)
	}
	return out, got
}

// checkReport requires what the translator reported of a JSON answer to
// be its text, by kind: all of a chat answer's, none of an error's or an
// answer of an endpoint that generates no text.
func checkReport(t testing.TB, ep Endpoint, tr translate.Translator, out []byte, failed bool) {
	t.Helper()
	got := reported{}
	got.add(t, tr, out)
	o := tr.Output()
	if (failed || ep == Embeddings || ep == Images) && len(o.Texts)+len(o.FinishReasons) > 0 {
		t.Errorf("reports %+v of an answer without text", o)
	}
	if ep != Chat || failed {
		return
	}
	// A whole answer's text members are found by name, as the gateway
	// always counted them: an annotation's quoted content (OpenRouter's
	// file annotations) follows the message's and counts too.
	want := answerText(t, out, false)
	for k := range maps.Keys(got) {
		if !strings.HasPrefix(got[k], want[k]) || len(want[k]) == 0 && k != translate.TextAnswer {
			t.Errorf("reported text %q, the answer's %q", got, want)
		}
	}
	for k := range maps.Keys(want) {
		if _, ok := got[k]; !ok {
			t.Errorf("reported text %q, the answer's %q", got, want)
		}
	}
}
