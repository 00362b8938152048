package state

import "github.com/hashicorp/go-msgpack/v2/codec"

// The hot commands (bunches of jobs, plans, worker events) are encoded by
// code that go-msgpack's codecgen generated (commands_codecgen.go: three
// times faster than reflection, and byte for byte the same form). After
// changing one of the types named below, regenerate it with `go generate
// ./server/state/`.
//
//go:generate go run github.com/hashicorp/go-msgpack/v2/codec/codecgen -o commands_codecgen.go -r ^(Events|Event|Plan|Placement|AddJobs|JobEntry|Spec|Where|Run|Policy|File|Usage|Range|CreateBatch|CreateUpdate|CommitUpdate|JobGroupDecl|Gang)$ commands.go types.go codec.go jobgroups.go
//go:generate sed -i "1a //lint:file-ignore SA1019 codecgen calls a helper of its own that its library marks deprecated" commands_codecgen.go

// StringMap is a map[string]string that encodes with its keys sorted.
// Generated encoders write maps in iteration order; log entries and
// snapshots must be the same bytes on every server and every run, so maps
// go through the handle's canonical (reflection) path.
type StringMap map[string]string

// CodecEncodeSelf implements codec.Selfer.
func (m StringMap) CodecEncodeSelf(e *codec.Encoder) {
	e.MustEncode(map[string]string(m))
}

// CodecDecodeSelf implements codec.Selfer.
func (m *StringMap) CodecDecodeSelf(d *codec.Decoder) {
	var plain map[string]string
	d.MustDecode(&plain)
	*m = plain
}
