package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fill sets every field reachable from v to a non-zero value, so a field
// added to a wire type is covered without touching this test.
func fill(v reflect.Value, depth int) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1700000000, 123000000).UTC()))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if depth > 6 {
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s" + v.Type().Name())
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(9)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	}
}

// TestWireTypesRoundTrip: every type the bulk endpoints carry survives
// MessagePack with every field set, and reads the same as through JSON. A
// field added to a type without regenerating its codec (go generate
// ./api/) is lost on the way and fails here.
func TestWireTypesRoundTrip(t *testing.T) {
	for _, v := range []any{
		&SyncRequest{}, &SyncResponse{}, &AttemptEvent{}, &AttemptRef{}, &Assignment{}, &AddJobsRequest{}, &JobSpec{},
		&CreateBatchRequest{}, &CreateUpdateRequest{}, &UpdateResponse{}, &CreateBatchResponse{},
	} {
		fill(reflect.ValueOf(v).Elem(), 0)
		data, err := MarshalMsgpack(v)
		if err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		got := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		if err := UnmarshalMsgpack(data, got); err != nil {
			t.Fatalf("%T: %v", v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%T changed on a msgpack round trip:\n got %+v\nwant %+v", v, got, v)
		}
		viaJSON := reflect.New(reflect.TypeOf(v).Elem()).Interface()
		js, _ := json.Marshal(v)
		if err := json.Unmarshal(js, viaJSON); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(viaJSON)
		if string(a) != string(b) {
			t.Fatalf("%T reads differently through msgpack and JSON:\n%s\n%s", v, a, b)
		}
	}
	if err := UnmarshalMsgpack([]byte{0x91, 0x01, 0xc0}, &AttemptRef{}); err == nil {
		t.Fatal("trailing bytes after the object were accepted")
	}
}
