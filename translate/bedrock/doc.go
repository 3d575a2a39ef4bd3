// Package bedrock translates OpenAI chat completions to and from Amazon
// Bedrock's Converse and ConverseStream APIs, including the binary
// application/vnd.amazon.eventstream framing of streams with its CRC
// checks.
package bedrock
