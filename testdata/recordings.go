// Package testdata embeds the recorded provider traffic that the mock
// provider replays, so that a built binary needs no files beside it. The
// recordings were made by third parties; fixtures/MANIFEST.md gives each
// file's source and license. (The go command leaves testdata folders out
// of ./... patterns; importing the package by its path works.)
package testdata

import "embed"

// Recordings holds fixtures/{openai,openai-compatible,anthropic,gemini,cohere,bedrock,azure,mistral} with the
// manifest and licenses.
//
//go:embed fixtures/MANIFEST.md fixtures/_licenses fixtures/openai fixtures/openai-compatible fixtures/anthropic fixtures/gemini fixtures/cohere fixtures/bedrock fixtures/azure fixtures/mistral
var Recordings embed.FS
