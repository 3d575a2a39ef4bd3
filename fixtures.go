// Package modelgate embeds the recorded provider traffic that the mock
// provider replays, so that a built binary needs no files beside it. The
// recordings were made by third parties; testdata/fixtures/MANIFEST.md
// gives each file's source and license.
package modelgate

import "embed"

// Recordings holds testdata/fixtures/{openai,openai-compatible,anthropic,gemini,cohere,bedrock,azure,mistral} with the
// manifest and licenses.
//
//go:embed testdata/fixtures/MANIFEST.md testdata/fixtures/_licenses testdata/fixtures/openai testdata/fixtures/openai-compatible testdata/fixtures/anthropic testdata/fixtures/gemini testdata/fixtures/cohere testdata/fixtures/bedrock testdata/fixtures/azure testdata/fixtures/mistral
var Recordings embed.FS
