// Package gemini translates OpenAI chat completions to and from the Gemini
// API (Google AI Studio): generateContent for JSON and
// streamGenerateContent?alt=sse for streams, authenticated with
// x-goog-api-key. System and developer messages become systemInstruction,
// assistant turns become "model" contents with functionCall parts, tool
// results become functionResponse parts, and each streamed
// GenerateContentResponse becomes a chat.completion.chunk.
package gemini
