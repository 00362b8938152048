package state

import (
	"bytes"
	"testing"
)

// FuzzDecode: no log entry makes the command decoder panic, and a command
// it accepts encodes back to bytes that decode to the same command.
func FuzzDecode(f *testing.F) {
	for _, c := range []Command{
		&Bootstrap{Now: 1, Admin: "root", TokenHash: "h", DefaultProject: "default"},
		&CreateUser{Now: 2, Name: "alice", TokenHash: "h2"},
		&CreateBatch{Now: 3, User: "alice", BillingProject: "default", Name: "b", Attributes: map[string]string{"k": "v"},
			Jobs: []JobEntry{{First: 1, Count: 3, Spec: &Spec{Name: "j", Command: []string{"true"}, Array: true, CPUMilli: 1000, Memory: 1 << 30},
				Parents: []Range{{1, 1}}}}},
		&CreateUpdate{Now: 4, Batch: 1, NJobs: 10},
		&Plan{Now: 5, Placements: []Placement{{Batch: 1, First: 1, Count: 2, Attempt: 1, Instance: 1}}},
		&Events{Now: 6, Events: []Event{{Batch: 1, Job: 1, Attempt: 1, Instance: 1, Started: true}}},
		&Activate{Now: 7, Name: "w", NodeID: "n", CPUMilli: 4000, Memory: 8 << 30, TokenHash: "t", MaxLost: 3},
		&Retire{Now: 8, Instance: 1, Reason: "gone", MaxLost: 3},
		&RotateToken{Now: 9, User: "alice", TokenHash: "h3"},
		&CancelBatch{Now: 10, Batch: 1, Reason: "r"},
		&AddJobs{Batch: 1, Update: 2, Now: 11, Jobs: []JobEntry{{First: 1, Count: 1, Spec: &Spec{Name: "k", Command: []string{"true"}, CPUMilli: 500, Memory: 1 << 20}}}},
		&ExpireUpdates{Now: 12, Before: 11, Reason: "idle", Updates: []UpdateRef{{Batch: 1, Update: 2}}},
		&AddJobs{Batch: 1, Update: 2, Now: 13, Jobs: []JobEntry{{First: 2, Count: 1, Spec: &Spec{Name: "c", Command: []string{"true"}, CPUMilli: 500, Memory: 1 << 20,
			Run: &Run{Image: "r/i:1", Network: "none", Inputs: []File{{Name: "a", URL: "file:///a", Path: "in/a"}}, Outputs: []File{{Name: "b", URL: "file:///b", Path: "out"}}}}}}},
		&Events{Now: 14, Events: []Event{{Batch: 1, Job: 1, Attempt: 1, Instance: 1, Sample: true, Usage: &Usage{CPUMillis: 5, PeakMemory: 1 << 20}}}},
		&Retire{Now: 15, Instance: 1, Reason: "spot", Preempted: true},
		&SetStoragePrefix{Now: 16, Project: "default", Prefix: StoragePrefix{URL: "s3://b/p", AddedBy: "root", Kind: "s3-keys", Sealed: []byte{1, 2, 3},
			S3Endpoint: "http://127.0.0.1:9000", S3Region: "us-east-1", S3PathStyle: true}},
		&RemoveStoragePrefix{Project: "default", URL: "s3://b/p"},
		&SetProjectSettings{Project: "default", AllowHostNetwork: new(bool)},
		&CreateUpdate{Now: 17, Batch: 1, NJobs: 2, Policy: PolicyStorage, User: "alice"},
		&ForgetInstances{Now: 18, Before: 17, Instances: []uint32{1, 2}},
	} {
		data, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{byte(CmdPlan) | byte(IgnoreUnknownFlag), 0x90})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil || c == nil {
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatalf("a decoded %s does not encode: %v", c.Type(), err)
		}
		c2, err := Decode(again)
		if err != nil {
			t.Fatalf("a re-encoded %s does not decode: %v", c.Type(), err)
		}
		third, _ := Encode(c2)
		if !bytes.Equal(again, third) {
			t.Fatalf("%s does not round-trip", c.Type())
		}
	})
}
