// Package guard is the gateway's guardrails engine: ordered rules that
// read the client's text before it reaches a provider (Check) and the
// answer's text before it reaches the client (Answer), and block, mask or
// monitor what they match.
//
// It reads text as the gateway's seams give it, never raw JSON: a
// request's by part (translate.RequestText, per API family), an answer's
// as the translator reports each piece of output it returns
// (translate.Output). A stream is checked in windows and its output held
// in whole events until the text in it is checked, never gathered whole;
// a blocked answer ends with its client API's own refusal (refusal.go).
package guard
