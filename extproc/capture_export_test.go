package extproc

import "math/rand/v2"

// CredentialSample is a credential of a documented shape with a random
// body: Text as written, Secret the part a capture must never keep.
type CredentialSample struct {
	Name         string
	Text, Secret string
}

// CredentialSamples returns one sample of every shape credentialSamples
// knows.
func CredentialSamples(r *rand.Rand) []CredentialSample {
	out := make([]CredentialSample, len(credentialSamples))
	for i, s := range credentialSamples {
		text, secret := s.make(r)
		out[i] = CredentialSample{s.name, text, secret}
	}
	return out
}
