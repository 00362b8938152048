package api

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// wireTypes are the types encoded as MessagePack arrays (those wire.go
// generates the codec of), but IDRange, an array already: each field's
// place in the array is its place in the struct.
var wireTypes = []any{SyncRequest{}, SyncResponse{}, Preemption{}, AttemptEvent{}, AttemptRef{}, Assignment{}, AddJobsRequest{},
	JobSpec{}, CreateBatchRequest{}, CreateUpdateRequest{}, UpdateResponse{}, InputFile{}, OutputFile{}, Usage{},
	StorageGrant{}, StorageCredentials{}, S3Settings{}, JobGroupSpec{}}

// TestWireFieldsAreOnlyAppended: an older client or server reads the
// MessagePack arrays of a newer one (and the reverse) only if no field
// moved: testdata/wire-fields.txt records each wire type's fields in
// order, and each type must still begin with them. A new field goes at
// the end of its struct, and at the end of its line in the file.
func TestWireFieldsAreOnlyAppended(t *testing.T) {
	data, err := os.ReadFile("testdata/wire-fields.txt")
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, fields, _ := strings.Cut(line, ":")
		recorded[name] = strings.Fields(fields)
	}
	for _, v := range wireTypes {
		typ := reflect.TypeOf(v)
		var fields []string
		for i := 0; i < typ.NumField(); i++ {
			if f := typ.Field(i); f.IsExported() && f.Tag.Get("codec") != "-" {
				fields = append(fields, f.Name)
			}
		}
		want, ok := recorded[typ.Name()]
		if !ok {
			t.Errorf("%s is not in testdata/wire-fields.txt: add the line %s: %s", typ.Name(), typ.Name(), strings.Join(fields, " "))
			continue
		}
		if len(fields) < len(want) || strings.Join(fields[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("%s's fields moved: the wire has %v, the struct %v; put new fields at the end", typ.Name(), want, fields)
			continue
		}
		if len(fields) > len(want) {
			t.Errorf("%s has new fields %v: append them to its line in testdata/wire-fields.txt", typ.Name(), fields[len(want):])
		}
	}
}
