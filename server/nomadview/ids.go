// Package nomadview shows drover's batches, jobs and attempts as Nomad's
// API does: jobs, evaluations, allocations, job summaries and nodes in
// nomad/api's types, with Nomad's IDs derived from drover's.
//
// A Nomad job is the batch its current version became; an allocation is
// one attempt of one of its drover jobs (a task of a group at an index);
// evaluations are synthesized: one per registered version (complete,
// with the groups it could not place yet as FailedTGAllocs and a blocked
// evaluation while any wait) and one for its stop. Every ID is a
// reversible function of drover's IDs (an AES permutation of them,
// printed as a UUID), so it is the same on every server and across
// failovers, and a request naming one finds its batch, job and attempt
// without a table.
package nomadview

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strings"
)

// idKey is the permutation's key: not a secret (an ID grants nothing; the
// route table decides who reads what), only a way to make IDs look like
// Nomad's random UUIDs, so that their 8-character prefixes, which Nomad's
// CLI shows and accepts, tell allocations apart.
var idKey = [16]byte{'d', 'r', 'o', 'v', 'e', 'r', '/', 'n', 'o', 'm', 'a', 'd', '/', 'i', 'd', 's'}

var idBlock = func() cipher.Block {
	b, err := aes.NewCipher(idKey[:])
	if err != nil {
		panic(err)
	}
	return b
}()

// Kinds of IDs, the first byte of the permuted block.
const (
	kindAlloc = 1 + iota
	kindEval
)

// EvalKind tells a job version's evaluations apart.
type EvalKind uint8

// Evaluations of a version: its registration, the blocked evaluation
// while some of it cannot be placed, and its stop.
const (
	EvalRegister EvalKind = iota
	EvalBlocked
	EvalStop
)

func encodeID(kind byte, a uint64, b uint32, c uint16) string {
	var blk [16]byte
	blk[0] = kind
	binary.BigEndian.PutUint64(blk[1:9], a)
	binary.BigEndian.PutUint32(blk[9:13], b)
	binary.BigEndian.PutUint16(blk[13:15], c)
	var out [16]byte
	idBlock.Encrypt(out[:], blk[:])
	h := hex.EncodeToString(out[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func decodeID(kind byte, id string) (a uint64, b uint32, c uint16, ok bool) {
	if len(id) != 36 {
		return 0, 0, 0, false
	}
	raw, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
	if err != nil || len(raw) != 16 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return 0, 0, 0, false
	}
	var blk [16]byte
	idBlock.Decrypt(blk[:], raw)
	if blk[0] != kind || blk[15] != 0 {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint64(blk[1:9]), binary.BigEndian.Uint32(blk[9:13]), binary.BigEndian.Uint16(blk[13:15]), true
}

// AllocID is the allocation ID of an attempt (attempts count from 1).
func AllocID(batch uint64, job uint32, attempt int) string {
	return encodeID(kindAlloc, batch, job, uint16(attempt))
}

// ParseAllocID reads an allocation ID back into its attempt.
func ParseAllocID(id string) (batch uint64, job uint32, attempt int, ok bool) {
	b, j, a, ok := decodeID(kindAlloc, strings.ToLower(id))
	return b, j, int(a), ok
}

// EvalID is the ID of one of a batch's evaluations.
func EvalID(batch uint64, kind EvalKind) string {
	return encodeID(kindEval, batch, uint32(kind), 0)
}

// ParseEvalID reads an evaluation ID back.
func ParseEvalID(id string) (batch uint64, kind EvalKind, ok bool) {
	b, k, _, ok := decodeID(kindEval, strings.ToLower(id))
	return b, EvalKind(k), ok && k <= uint32(EvalStop)
}

// NodeID is the node ID of a worker, from its name (a worker's name is
// its identity while it lives; /v1/node/:id finds it among the workers).
func NodeID(name string) string {
	if name == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("drover/nomad/node/" + name))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
