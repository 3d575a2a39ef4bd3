package replay

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// The mock's embeddings endpoints. OpenAI's (and Azure's) replay the
// recordings under openai/embeddings. No other provider's embeddings
// success was recorded, so their answers are made up in each provider's
// documented response shape: the vectors are derived from the input text
// (a seeded unit vector, so the same text always gets the same vector),
// their length is the model's default or the requested one, and token
// counts are one per four characters. Each endpoint checks what its
// provider would (batch limits, allowed dimensions, required members) and
// answers recorded errors for the models those recordings asked for.

func (s *Server) embeddingRoutes() {
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/v1/embeddings", s.openaiEmbeddings)
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/openai/deployments/{deployment}/embeddings", azureDeployment(s.azureEmbeddings))
	s.mux.HandleFunc("POST "+s.cfg.PathPrefix+"/v2/embed", s.cohereEmbed)
	s.methods["gemini:embedContent"] = append(s.methods["gemini:embedContent"], s.geminiEmbedContent)
	s.methods["gemini:batchEmbedContents"] = append(s.methods["gemini:batchEmbedContents"], s.geminiEmbedContent)
	s.methods["vertex:predict"] = append(s.methods["vertex:predict"], s.vertexEmbeddings)
	s.methods["bedrock:invoke"] = append(s.methods["bedrock:invoke"], s.bedrockEmbeddings)
}

// embeddingVector is the mock's stand-in for an embedding model: n float32
// values of a unit vector seeded by the text.
func embeddingVector(text string, n int) []float32 {
	seed := sha256.Sum256([]byte(text))
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:16])))
	v := make([]float64, n)
	var norm float64
	for i := range v {
		v[i] = rng.NormFloat64()
		norm += v[i] * v[i]
	}
	out := make([]float32, n)
	for i := range v {
		out[i] = float32(v[i] / math.Sqrt(norm))
	}
	return out
}

// embeddingTokens counts one token per four characters, at least one.
func embeddingTokens(texts ...string) int {
	n := 0
	for _, t := range texts {
		n += max(1, (utf8.RuneCountInString(t)+3)/4)
	}
	return n
}

// embeddingBase64 is OpenAI's encoding: little-endian float32, standard
// base64.
func embeddingBase64(v []float32) string {
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func writeEmbeddingJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client went away
}

// openaiEmbeddingsRequest is what the mock reads of a CreateEmbeddingRequest.
type openaiEmbeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

// inputs counts the inputs: a string or token array is one.
func (r openaiEmbeddingsRequest) inputs() []string {
	var one string
	if json.Unmarshal(r.Input, &one) == nil {
		return []string{one}
	}
	var many []json.RawMessage
	if json.Unmarshal(r.Input, &many) != nil || len(many) == 0 {
		return nil
	}
	var first any
	if json.Unmarshal(many[0], &first) == nil {
		if _, isNumber := first.(float64); isNumber {
			return []string{string(r.Input)}
		}
	}
	out := make([]string, len(many))
	for i, m := range many {
		if json.Unmarshal(m, &out[i]) != nil {
			out[i] = string(m)
		}
	}
	return out
}

// openaiEmbeddings serves POST /v1/embeddings: OpenAI's recordings, and
// Mistral's API for mistral-embed and codestral-embed models.
func (s *Server) openaiEmbeddings(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req openaiEmbeddingsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request.")
		return
	}
	if strings.HasPrefix(req.Model, "mistral-embed") || strings.HasPrefix(req.Model, "codestral-embed") {
		s.mistralEmbeddings(w, body)
		return
	}
	dir := "openai/embeddings/TestOpenAI.test_query.bodies"
	switch {
	case req.Model == "nonexistent":
		dir = "openai/errors/TestOpenAI.test_embed_error.bodies"
	case req.Model == "text-embedding-4-ultra":
		dir = "openai/errors/embeddings-unknown-model.bodies"
	case req.Dimensions > 0:
		dir = "openai/embeddings/embeddings-dimensions.bodies"
	case req.EncodingFormat == "base64":
		dir = "openai/embeddings/embeddings-base64.bodies"
	}
	s.replayEmbeddings(w, dir, req)
}

// azureEmbeddings serves Azure OpenAI's deployment path. No Azure
// embeddings were recorded; it answers from one OpenAI recording (or the
// dimensions one) whatever the encoding, so that float and base64 answers
// carry the same vectors.
func (s *Server) azureEmbeddings(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req openaiEmbeddingsRequest
	if json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not parse the JSON body")
		return
	}
	dir := "openai/embeddings/TestOpenAI.test_query.bodies"
	if req.Dimensions > 0 {
		dir = "openai/embeddings/embeddings-dimensions.bodies"
	}
	s.replayEmbeddings(w, dir, req)
}

// replayEmbeddings replays a recording as is when it answers the request
// exactly. The recordings hold one base64 vector each; for a float request
// the mock decodes it, and for several inputs it repeats the vector, one
// per input (derived from the recording, like derive.go's shapes).
func (s *Server) replayEmbeddings(w http.ResponseWriter, dir string, req openaiEmbeddingsRequest) {
	rec, err := s.load(dir)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	n := len(req.inputs())
	if rec.status != http.StatusOK || n == 1 && req.EncodingFormat == "base64" {
		s.replay(w, rec)
		return
	}
	var resp map[string]any
	if err := json.Unmarshal(rec.body, &resp); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	data, _ := resp["data"].([]any)
	if len(data) == 0 {
		writeError(w, http.StatusInternalServerError, "server_error", "", "the recording has no embeddings")
		return
	}
	recorded, _ := data[0].(map[string]any)["embedding"].(string)
	raw, err := base64.StdEncoding.DecodeString(recorded)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
		return
	}
	var embedding any = recorded
	if req.EncodingFormat != "base64" {
		floats := make([]float32, len(raw)/4)
		for i := range floats {
			floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		embedding = floats
	}
	out := make([]any, max(n, 1))
	for i := range out {
		out[i] = map[string]any{"object": "embedding", "index": i, "embedding": embedding}
	}
	resp["data"] = out
	writeEmbeddingJSON(w, http.StatusOK, resp)
}

// mistralEmbeddings answers like Mistral's /v1/embeddings, whose request
// schema forbids members of its own list (a 422 with FastAPI's validation
// detail) and takes output_dimension for codestral-embed only.
func (s *Server) mistralEmbeddings(w http.ResponseWriter, body []byte) {
	var members map[string]json.RawMessage
	json.Unmarshal(body, &members) //nolint:errcheck // parsed before
	for name := range members {
		if !slices.Contains([]string{"model", "input", "metadata", "output_dimension", "output_dtype", "encoding_format"}, name) {
			writeEmbeddingJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{map[string]any{
				"type": "extra_forbidden", "loc": []string{"body", name}, "msg": "Extra inputs are not permitted"}}})
			return
		}
	}
	var req struct {
		Model           string          `json:"model"`
		Input           json.RawMessage `json:"input"`
		OutputDimension int             `json:"output_dimension"`
		EncodingFormat  string          `json:"encoding_format"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // parsed before
	var texts []string
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		texts = []string{one}
	} else if json.Unmarshal(req.Input, &texts) != nil || len(texts) == 0 {
		writeEmbeddingJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []any{map[string]any{
			"type": "string_type", "loc": []string{"body", "input"}, "msg": "Input should be a valid string or list of strings"}}})
		return
	}
	dims := 1024
	switch {
	case strings.HasPrefix(req.Model, "codestral-embed") && req.OutputDimension > 0 && req.OutputDimension <= 3072:
		dims = req.OutputDimension
	case strings.HasPrefix(req.Model, "codestral-embed") && req.OutputDimension == 0:
		dims = 1536
	case req.OutputDimension > 0:
		writeEmbeddingJSON(w, http.StatusBadRequest, map[string]any{"object": "error", "type": "invalid_request_error",
			"message": fmt.Sprintf("output_dimension %d is not supported by %s", req.OutputDimension, req.Model)})
		return
	}
	data := make([]any, len(texts))
	for i, t := range texts {
		var embedding any = embeddingVector(t, dims)
		if req.EncodingFormat == "base64" {
			embedding = embeddingBase64(embedding.([]float32))
		}
		data[i] = map[string]any{"object": "embedding", "embedding": embedding, "index": i}
	}
	tokens := embeddingTokens(texts...)
	sum := sha256.Sum256(body)
	writeEmbeddingJSON(w, http.StatusOK, map[string]any{"id": "embd-" + hex.EncodeToString(sum[:8]), "object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": tokens, "completion_tokens": 0, "total_tokens": tokens, "prompt_audio_seconds": nil}})
}

// googleError writes Google's error envelope.
func googleEmbedError(w http.ResponseWriter, status int, code, msg string) {
	writeEmbeddingJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": code}})
}

// googleEmbedding is a Google model's vector for text: its full length
// (3072 for gemini-embedding models, 768 for the others), or
// outputDimensionality values of it, truncated from the end as Google
// documents.
func googleEmbedding(model, text string, dims int) ([]float32, error) {
	full := 768
	if strings.HasPrefix(model, "gemini-embedding") {
		full = 3072
	}
	switch {
	case dims == 0:
		dims = full
	case dims < 0 || dims > full:
		return nil, fmt.Errorf("outputDimensionality must be between 1 and %d", full)
	}
	return embeddingVector(text, full)[:dims], nil
}

type geminiEmbedRequest struct {
	Model   string `json:"model"`
	Content struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"content"`
	OutputDimensionality int `json:"outputDimensionality"`
}

func (g geminiEmbedRequest) text() string {
	var b strings.Builder
	for _, p := range g.Content.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// geminiEmbedContent serves embedContent and batchEmbedContents; the
// model nonexistent-model gets the recorded 404.
func (s *Server) geminiEmbedContent(w http.ResponseWriter, r *http.Request, body []byte) bool {
	model, method, _ := strings.Cut(r.PathValue("call"), ":")
	if model == "nonexistent-model" {
		rec, err := s.load("gemini/TestGoogle.test_embed_error.bodies")
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
			return true
		}
		s.replay(w, rec)
		return true
	}
	var reqs []geminiEmbedRequest
	if method == "batchEmbedContents" {
		var batch struct {
			Requests []geminiEmbedRequest `json:"requests"`
		}
		if json.Unmarshal(body, &batch) != nil || len(batch.Requests) == 0 {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
			return true
		}
		if len(batch.Requests) > 100 {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* BatchEmbedContentsRequest.requests: at most 100 requests can be in one batch\n")
			return true
		}
		for _, req := range batch.Requests {
			if req.Model != "models/"+model {
				googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Model name in the request (%s) does not match the model in the URL (models/%s).", req.Model, model))
				return true
			}
		}
		reqs = batch.Requests
	} else {
		var req geminiEmbedRequest
		if json.Unmarshal(body, &req) != nil {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
			return true
		}
		reqs = []geminiEmbedRequest{req}
	}
	out := make([]any, len(reqs))
	for i, req := range reqs {
		text := req.text()
		if text == "" {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "* EmbedContentRequest.content: contents must not be empty\n")
			return true
		}
		values, err := googleEmbedding(model, text, req.OutputDimensionality)
		if err != nil {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
			return true
		}
		out[i] = map[string]any{"values": values}
	}
	if method == "batchEmbedContents" {
		writeEmbeddingJSON(w, http.StatusOK, map[string]any{"embeddings": out})
	} else {
		writeEmbeddingJSON(w, http.StatusOK, map[string]any{"embedding": out[0]})
	}
	return true
}

// vertexEmbeddings serves :predict for text embedding models (instances
// with content); other predict requests, such as Imagen's, are not its.
func (s *Server) vertexEmbeddings(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var req struct {
		Instances []struct {
			Content *string `json:"content"`
		} `json:"instances"`
		Parameters struct {
			OutputDimensionality int `json:"outputDimensionality"`
		} `json:"parameters"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Instances) == 0 || req.Instances[0].Content == nil {
		return false
	}
	model, _, _ := strings.Cut(r.PathValue("call"), ":")
	limit := 250
	if strings.HasPrefix(model, "gemini-embedding") {
		limit = 1
	}
	if len(req.Instances) > limit {
		googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("The model %s supports up to %d instances per request, but got %d.", model, limit, len(req.Instances)))
		return true
	}
	predictions := make([]any, len(req.Instances))
	chars := 0
	for i, in := range req.Instances {
		if in.Content == nil {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Each instance needs content.")
			return true
		}
		values, err := googleEmbedding(model, *in.Content, req.Parameters.OutputDimensionality)
		if err != nil {
			googleEmbedError(w, http.StatusBadRequest, "INVALID_ARGUMENT", err.Error())
			return true
		}
		chars += utf8.RuneCountInString(*in.Content)
		predictions[i] = map[string]any{"embeddings": map[string]any{
			"statistics": map[string]any{"truncated": false, "token_count": embeddingTokens(*in.Content)}, "values": values}}
	}
	writeEmbeddingJSON(w, http.StatusOK, map[string]any{"predictions": predictions, "metadata": map[string]any{"billableCharacterCount": chars}})
	return true
}

// bedrockError writes a Bedrock Runtime error: {"message"} and its type in
// a header.
func bedrockEmbedError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-Errortype", typ)
	writeEmbeddingJSON(w, status, map[string]string{"message": msg})
}

// bedrockEmbeddings serves InvokeModel for Titan Text Embeddings and
// Cohere Embed models; other models' invoke requests are not its.
func (s *Server) bedrockEmbeddings(w http.ResponseWriter, r *http.Request, body []byte) bool {
	model := r.PathValue("model")
	switch {
	case strings.Contains(model, "amazon.titan-embed-text"):
		s.titanEmbeddings(w, model, body)
	case strings.Contains(model, "cohere.embed"):
		s.bedrockCohereEmbed(w, model, body)
	default:
		return false
	}
	return true
}

func (s *Server) titanEmbeddings(w http.ResponseWriter, model string, body []byte) {
	v2 := strings.Contains(model, "-v2")
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	}
	allowed := []string{"inputText"}
	if v2 {
		allowed = append(allowed, "dimensions", "normalize", "embeddingTypes")
	}
	for name := range members {
		if !slices.Contains(allowed, name) {
			bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: extraneous key ["+name+"] is not permitted, please reformat your input and try again.")
			return
		}
	}
	var req struct {
		InputText  string `json:"inputText"`
		Dimensions int    `json:"dimensions"`
	}
	json.Unmarshal(body, &req) //nolint:errcheck // parsed before
	dims := 1536
	if v2 {
		dims = 1024
		if req.Dimensions != 0 {
			dims = req.Dimensions
		}
	}
	switch {
	case req.InputText == "":
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #/inputText: expected minLength: 1, actual: 0, please reformat your input and try again.")
		return
	case v2 && !slices.Contains([]int{256, 512, 1024}, dims):
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #/dimensions: "+fmt.Sprint(dims)+" is not a valid enum value, please reformat your input and try again.")
		return
	}
	v := embeddingVector(req.InputText, dims)
	resp := map[string]any{"embedding": v, "inputTextTokenCount": embeddingTokens(req.InputText)}
	if v2 {
		resp["embeddingsByType"] = map[string]any{"float": v}
	}
	writeEmbeddingJSON(w, http.StatusOK, resp)
}

func (s *Server) bedrockCohereEmbed(w http.ResponseWriter, model string, body []byte) {
	var req struct {
		Texts           []string `json:"texts"`
		InputType       string   `json:"input_type"`
		EmbeddingTypes  []string `json:"embedding_types"`
		OutputDimension int      `json:"output_dimension"`
	}
	if json.Unmarshal(body, &req) != nil {
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.")
		return
	}
	v4 := strings.Contains(model, "embed-v4")
	dims := 1024
	switch {
	case strings.Contains(model, "light"):
		dims = 384
	case v4 && req.OutputDimension != 0:
		dims = req.OutputDimension
	case v4:
		dims = 1536
	}
	switch {
	case len(req.Texts) == 0 || len(req.Texts) > 96:
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("Malformed input request: #/texts: expected 1 to 96 texts, got %d", len(req.Texts)))
		return
	case req.InputType == "":
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #: required key [input_type] not found")
		return
	case !v4 && req.OutputDimension != 0 || v4 && !slices.Contains([]int{256, 512, 1024, 1536}, dims):
		bedrockEmbedError(w, http.StatusBadRequest, "ValidationException", "Malformed input request: #/output_dimension is not supported")
		return
	}
	vectors := make([][]float32, len(req.Texts))
	for i, t := range req.Texts {
		vectors[i] = embeddingVector(t, dims)
	}
	sum := sha256.Sum256(body)
	resp := map[string]any{"id": hex.EncodeToString(sum[:16]), "texts": req.Texts,
		"response_type": "embeddings_floats", "embeddings": vectors}
	if len(req.EmbeddingTypes) > 0 {
		resp["response_type"], resp["embeddings"] = "embeddings_by_type", map[string]any{"float": vectors}
	}
	writeEmbeddingJSON(w, http.StatusOK, resp)
}

// cohereEmbed serves Cohere's POST /v2/embed; the model nonexistent gets
// the recorded 404.
func (s *Server) cohereEmbed(w http.ResponseWriter, r *http.Request) {
	body := requestBody(r)
	var req struct {
		Model           string   `json:"model"`
		Texts           []string `json:"texts"`
		InputType       string   `json:"input_type"`
		EmbeddingTypes  []string `json:"embedding_types"`
		OutputDimension int      `json:"output_dimension"`
	}
	if json.Unmarshal(body, &req) != nil {
		writeEmbeddingJSON(w, http.StatusBadRequest, map[string]string{"id": "mock", "message": "invalid request: could not parse the JSON body"})
		return
	}
	if req.Model == "nonexistent" {
		rec, err := s.load("cohere/TestCohere.test_embed_error.bodies")
		if err != nil {
			writeError(w, http.StatusInternalServerError, "server_error", "", err.Error())
			return
		}
		s.replay(w, rec)
		return
	}
	v4 := strings.HasPrefix(req.Model, "embed-v4")
	dims := 1024
	switch {
	case strings.Contains(req.Model, "light"):
		dims = 384
	case v4 && req.OutputDimension != 0:
		dims = req.OutputDimension
	case v4:
		dims = 1536
	}
	var problem string
	switch {
	case len(req.Texts) == 0 || len(req.Texts) > 96:
		problem = fmt.Sprintf("invalid request: texts must have between 1 and 96 items, got %d", len(req.Texts))
	case req.InputType == "":
		problem = "invalid request: input_type is required for embed models v3 and higher"
	case len(req.EmbeddingTypes) == 0:
		problem = "invalid request: embedding_types is required"
	case !v4 && req.OutputDimension != 0:
		problem = "invalid request: output_dimension is only supported for embed-v4.0 and newer models"
	case v4 && !slices.Contains([]int{256, 512, 1024, 1536}, dims):
		problem = "invalid request: output_dimension must be one of 256, 512, 1024, 1536"
	}
	sum := sha256.Sum256(body)
	id := hex.EncodeToString(sum[:16])
	if problem != "" {
		writeEmbeddingJSON(w, http.StatusBadRequest, map[string]string{"id": id, "message": problem})
		return
	}
	// The mock makes float embeddings only; other types are left out.
	byType := map[string]any{}
	if slices.Contains(req.EmbeddingTypes, "float") {
		vectors := make([]any, len(req.Texts))
		for i, t := range req.Texts {
			vectors[i] = embeddingVector(t, dims)
		}
		byType["float"] = vectors
	}
	writeEmbeddingJSON(w, http.StatusOK, map[string]any{"id": id, "embeddings": byType, "texts": req.Texts, "response_type": "embeddings_by_type",
		"meta": map[string]any{"api_version": map[string]any{"version": "2"}, "billed_units": map[string]any{"input_tokens": embeddingTokens(req.Texts...)}}})
}
