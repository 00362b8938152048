package api

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// MsgpackContentType is the binary encoding the API accepts beside JSON on
// the endpoints that carry bulk data (worker syncs, job bunches, batch and
// update creation): the same objects as the JSON, in MessagePack, each
// object an array of its fields in the order this package declares them
// (fields are only ever appended, so an older reader ignores what it does
// not know). A server decodes it in a tenth of the time of JSON. A
// request sent with this Content-Type is read as MessagePack; a request
// that names it in Accept is answered in it. Errors are always JSON.
const MsgpackContentType = "application/vnd.msgpack"

// The wire types are encoded by code that go-msgpack's codecgen generated
// (wire_codecgen.go); after changing one of them, run `go generate ./api/`.
//
//go:generate go run github.com/hashicorp/go-msgpack/v2/codec/codecgen -o wire_codecgen.go -r ^(SyncRequest|SyncResponse|Preemption|AttemptEvent|AttemptRef|Assignment|AddJobsRequest|JobSpec|IDRange|CreateBatchRequest|CreateUpdateRequest|UpdateResponse|InputFile|OutputFile|OOMRetry|Usage|StorageGrant|StorageCredentials|S3Settings|JobGroupSpec)$ types.go storage.go
//go:generate sed -i "1a //lint:file-ignore SA1019 codecgen calls a helper of its own that its library marks deprecated" wire_codecgen.go

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true // time.Time as the MessagePack timestamp extension
	h.StructToArray = true
	// Never make a collection larger up front than a bounded body could
	// fill; beyond it, decoding appends as elements actually arrive.
	h.MaxInitLen = 4096
	return h
}()

// MarshalMsgpack encodes v in the API's MessagePack form.
func MarshalMsgpack(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(v); err != nil {
		return nil, fmt.Errorf("encode msgpack: %w", err)
	}
	return buf.Bytes(), nil
}

// UnmarshalMsgpack decodes data, one MessagePack object, into v. Data
// after the object is an error, as it is for JSON bodies.
func UnmarshalMsgpack(data []byte, v any) error {
	dec := codec.NewDecoderBytes(data, msgpackHandle)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if n := dec.NumBytesRead(); n != len(data) {
		return fmt.Errorf("%d bytes after the msgpack object", len(data)-n)
	}
	return nil
}
