// Package sttse2e holds the end-to-end test of the embedded recogniser:
// speech synthesised with flite and espeak-ng is streamed by a WebSocket
// client through a real session and pipeline into the PocketSphinx engine,
// and the transcripts the client receives are checked.
package sttse2e
