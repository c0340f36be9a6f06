// Package pipeline runs one utterance through the stages of voiced: STT,
// then intent and retrieval in parallel, then the LLM, all under the one
// deadline of the request. It declares the small interfaces it needs from
// each stage; the engines live in internal/stages/... and satisfy them.
package pipeline
