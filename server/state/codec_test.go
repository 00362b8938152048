package state

import (
	"encoding/hex"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/commands.golden")

// codecSamples are commands of every type whose codec is generated, with
// every field set (maps of several keys, to catch a non-canonical order).
func codecSamples() []Command {
	sp := &Spec{Name: "align", Array: true, Command: []string{"sh", "-c", "x"}, Env: StringMap{"Z": "1", "A": "2", "M": "3"},
		CPUMilli: 1500, Memory: 3 << 30, TimeoutMs: 60000, Retries: 2, AlwaysRun: true, Attributes: StringMap{"k2": "v", "k1": "w"}, Run: &Run{Group: 1, Gang: &Gang{Size: 10, Uniform: "label:rack", Lead: 3}}}
	entries := []JobEntry{{First: 1, Count: 10, Parents: []Range{{1, 1}}, BatchParents: []Range{{3, 7}}, Spec: sp}, {First: 11, Count: 1, Spec: &Spec{Name: "one"}}}
	return []Command{
		&CreateBatch{Now: 1, User: "u", Name: "n", BillingProject: "p", Attributes: StringMap{"b": "1", "a": "2"}, Key: "k", NJobs: 0, Jobs: entries, CancelAfterFailures: 3, Callback: "https://hooks.example/done", Queue: "org/proj/tier1", Priority: -7, SLONs: 3600e9, DeadlineNs: 9e18,
			Groups: []JobGroupDecl{{Path: "align", Attributes: StringMap{"y": "1", "x": "2"}, Callback: "https://hooks.example/align", CancelAfter: 2, Gang: true, GangUniformity: "pool"}}},
		&CreateUpdate{Now: 2, Batch: 3, Key: "k", NJobs: 4, Jobs: entries, Groups: []JobGroupDecl{{Path: "align"}}},
		&AddJobs{Batch: 5, Update: 6, Jobs: entries, Now: 7, Groups: []JobGroupDecl{{Path: "align"}, {Path: "align/chr1"}}},
		&CommitUpdate{Now: 8, Batch: 9, Update: 10},
		&Plan{Now: 11, Placements: []Placement{{Batch: 1, First: 2, Count: 3, Attempt: 4, Instance: 5}, {Batch: 6, First: 7, Count: 1, Attempt: 1, Instance: 9}}},
		&Events{Now: 12, Events: []Event{{Instance: 1, Batch: 2, Job: 3, Attempt: 4, Started: true, Start: 5},
			{Instance: 1, Batch: 2, Job: 3, Attempt: 4, Outcome: OutcomeFailed, Exit: -1, Start: 5, End: 6, Message: "exit 1"}}},
	}
}

// TestGeneratedCodecKeepsTheLogFormat: the generated encoders write the
// bytes of testdata/commands.golden (the reflection encoder wrote the
// first version, commands.v1.golden, which TestEntriesFromBeforePlacement
// reads) and decode them back.
func TestGeneratedCodecKeepsTheLogFormat(t *testing.T) {
	var lines []string
	for _, c := range codecSamples() {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, hex.EncodeToString(data))
	}
	const golden = "testdata/commands.golden"
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	wantLines := strings.Split(strings.TrimSpace(string(want)), "\n")
	for i, c := range codecSamples() {
		if i >= len(wantLines) || lines[i] != wantLines[i] {
			t.Fatalf("%s encodes differently from the log format:\n got %s\nwant %s", c.Type(), lines[i], wantLines[min(i, len(wantLines)-1)])
		}
		data, _ := hex.DecodeString(wantLines[i])
		dec, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", c.Type(), err)
		}
		again, _ := Encode(dec)
		if hex.EncodeToString(again) != wantLines[i] {
			t.Fatalf("%s does not round-trip", c.Type())
		}
	}
}

// TestEntriesFromBeforePlacementDecode: log entries written before specs
// carried regions and a pool (testdata/commands.v1.golden), and before
// they carried a container and files and events carried usage
// (commands.v2.golden), and before runs carried a Policy and events an
// OOM (commands.v3.golden), and before events said their worker was
// leaving (commands.v4.golden), and before job groups (commands.v5.golden),
// and before job groups could be gangs (commands.v6.golden), decode to the
// same commands, with none of it (nor anything newer).
func TestEntriesFromBeforePlacementDecode(t *testing.T) {
	for _, golden := range []string{"testdata/commands.v1.golden", "testdata/commands.v2.golden", "testdata/commands.v3.golden", "testdata/commands.v4.golden", "testdata/commands.v5.golden", "testdata/commands.v6.golden"} {
		old, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(old)), "\n")
		for i, c := range codecSamples() {
			data, _ := hex.DecodeString(lines[i])
			dec, err := Decode(data)
			if err != nil {
				t.Fatalf("%s: %s: %v", golden, c.Type(), err)
			}
			switch c := c.(type) { // job groups are newer than these entries
			case *CreateBatch:
				if strings.HasSuffix(golden, "v6.golden") { // only group gangs are
					c.Groups[0].Gang, c.Groups[0].GangUniformity = false, ""
					c.Jobs[0].Spec.Run.Gang.Lead = 0
					break
				}
				c.Groups, c.Jobs[0].Spec.Run = nil, nil
			case *CreateUpdate:
				if strings.HasSuffix(golden, "v6.golden") {
					c.Jobs[0].Spec.Run.Gang.Lead = 0
					break
				}
				c.Groups, c.Jobs[0].Spec.Run = nil, nil
			case *AddJobs:
				if strings.HasSuffix(golden, "v6.golden") {
					c.Jobs[0].Spec.Run.Gang.Lead = 0
					break
				}
				c.Groups, c.Jobs[0].Spec.Run = nil, nil
			}
			if cb, ok := c.(*CreateBatch); ok && !strings.HasSuffix(golden, "v3.golden") && !strings.HasSuffix(golden, "v4.golden") && !strings.HasSuffix(golden, "v5.golden") && !strings.HasSuffix(golden, "v6.golden") {
				cb.CancelAfterFailures, cb.Callback, cb.Queue, cb.Priority, cb.SLONs, cb.DeadlineNs = 0, "", "", 0, 0, 0 // newer than these entries
			}
			got, _ := Encode(dec)
			want, _ := Encode(c)
			if hex.EncodeToString(got) != hex.EncodeToString(want) {
				t.Fatalf("%s: %s from before decodes as\n%x\nwant\n%x", golden, c.Type(), got, want)
			}
		}
	}
	// And a constrained spec survives the round trip.
	c := &AddJobs{Batch: 1, Update: 1, Jobs: []JobEntry{{First: 1, Count: 1, Spec: &Spec{Name: "x", Where: &Where{Regions: []string{"eu-west4", "us-east1"}, Pool: "highmem"}}}}}
	data, _ := Encode(c)
	dec, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if sp := dec.(*AddJobs).Jobs[0].Spec; len(sp.Regions()) != 2 || sp.Regions()[1] != "us-east1" || sp.Pool() != "highmem" {
		t.Fatalf("decoded spec %+v", sp)
	}
}

// TestSnapshotGroupsKeepTheSnapshotFormat: a batch's groups, copied as
// pointers and pending counts, encode exactly as the []snapGroup that
// snapshots held before (and that restores decode).
func TestSnapshotGroupsKeepTheSnapshotFormat(t *testing.T) {
	sp := &Spec{Name: "g", Command: []string{"true"}, Env: StringMap{"B": "1", "A": "2"}, CPUMilli: 1000, Memory: 1 << 20}
	parents := []int32{0, 2}
	groups := []*group{{first: 1, count: 5, spec: sp, pLo: 0, pHi: 2, pending: 7}, {first: 6, count: 1, spec: sp, pLo: 2, pHi: 2}}
	for _, gs := range [][]*group{groups, {}} {
		var plain []snapGroup
		view := snapGroups{groups: gs, pending: make([]uint32, len(gs)), parents: parents}
		for i, g := range gs {
			var ps []int32
			if g.pHi > g.pLo {
				ps = parents[g.pLo:g.pHi]
			}
			plain = append(plain, snapGroup{First: g.first, Count: g.count, Spec: g.spec, Parents: ps, Pending: g.pending})
			view.pending[i] = g.pending
		}
		if plain == nil {
			plain = []snapGroup{}
		}
		encode := func(v any) string {
			var out []byte
			if err := codec.NewEncoderBytes(&out, msgpackHandle).Encode(v); err != nil {
				t.Fatal(err)
			}
			return hex.EncodeToString(out)
		}
		if got, want := encode(&view), encode(plain); got != want {
			t.Fatalf("%d groups: encoded %s, the format is %s", len(gs), got, want)
		}
		var back snapGroups
		raw, _ := hex.DecodeString(encode(&view))
		if err := codec.NewDecoderBytes(raw, msgpackHandle).Decode(&back); err != nil || len(back.decoded) != len(gs) {
			t.Fatalf("decoded %+v %v", back.decoded, err)
		}
		if len(gs) > 0 && (back.decoded[0].Pending != 7 || back.decoded[0].Spec.Env["A"] != "2") {
			t.Fatalf("decoded %+v", back.decoded[0])
		}
	}
	// And inside a snapshot: a batch restored from one has its groups.
	h := newHarness(t)
	b := h.CreateBatch(entry(1, 3, spec("a", 1)), entry(4, 1, spec("b", 1), Range{1, 3}))
	s := New()
	if err := s.Restore(strings.NewReader(string(SnapshotBytes(t, h.S)))); err != nil {
		t.Fatal(err)
	}
	if got := len(s.batches[b].groups); got != 2 || s.batches[b].groups[1].pending != 1 {
		t.Fatalf("restored %d groups", got)
	}
}

// TestGeneratedCodecKeepsEveryField: a command with every field of its
// spec set comes back whole, so a field added to a type without
// regenerating commands_codecgen.go (which would drop it from the log)
// fails here.
func TestGeneratedCodecKeepsEveryField(t *testing.T) {
	sp := &Spec{Name: "n", Array: true, Command: []string{"a"}, Env: StringMap{"K": "V"}, CPUMilli: 1, Memory: 2, TimeoutMs: 3,
		Retries: 4, AlwaysRun: true, Attributes: StringMap{"a": "b"},
		Where: &Where{Regions: []string{"r"}, Pool: "p", GPUType: "a100", GPUs: 2, MachineType: "n2-highmem-96", Labels: []string{"rack=r1"}, Clusters: []string{"c1"}, NoSpot: true},
		Run: &Run{Image: "reg/tool:1", Network: "host", Inputs: []File{{Name: "ref", URL: "gs://b/ref.fa", Path: "ref.fa"}},
			Outputs: []File{{Name: "bam", URL: "gs://b/out.bam", Path: "/io/out.bam"}}, MaxProcesses: 64, PreemptGraceMs: 45_000, Nomad: true,
			Policy: &Policy{MaxLost: -1, OOMFactorMilli: 2000, OOMMaxMemory: 16 << 30, MaxSpot: 3}, Group: 7, Gang: &Gang{Size: 3, Uniform: "pool", Lead: 2}}}
	usage := &Usage{CPUMillis: 1, PeakMemory: 2, BytesIn: 3, BytesOut: 4, ImageMillis: 5, InputMillis: 6, OutputMillis: 7, Memory: 8}
	ev := Event{Instance: 1, Batch: 2, Job: 3, Attempt: 4, Started: true, Outcome: OutcomeSuccess, Exit: 5, Start: 6, End: 7, Message: "m", Usage: usage, Sample: true, OOM: true, Leaving: true}
	// Every exported field must be set, or this test proves nothing.
	for _, v := range []reflect.Value{reflect.ValueOf(*sp), reflect.ValueOf(*sp.Where), reflect.ValueOf(*sp.Run), reflect.ValueOf(*sp.Run.Policy), reflect.ValueOf(*sp.Run.Gang), reflect.ValueOf(sp.Run.Inputs[0]),
		reflect.ValueOf(*usage), reflect.ValueOf(ev)} {
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() && v.Field(i).IsZero() {
				t.Fatalf("set %s.%s in this test", v.Type().Name(), v.Type().Field(i).Name)
			}
		}
	}
	for _, c := range []Command{
		&AddJobs{Batch: 1, Update: 2, Jobs: []JobEntry{{First: 1, Count: 3, Parents: []Range{{1, 1}}, BatchParents: []Range{{2, 3}}, Spec: sp}}, Now: 5,
			Groups: []JobGroupDecl{{Path: "a/b", Attributes: StringMap{"k": "v"}, Callback: "https://h.example/x", CancelAfter: 9, Gang: true, GangUniformity: "label:rack"}}},
		&Events{Now: 1, Events: []Event{ev}},
	} {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("decoded %+v, want %+v", back, c)
		}
	}
}

// createBatchBeforeCancelAfter is a create_batch entry of the binary
// before cancel_after_n_failures (the first line of commands.golden then):
// it decodes with the option unset.
const createBatchBeforeCancelAfter = "059a01a175a16ea17082a161a132a162a131a16b009295010a91920101919203079ca5616c69676ec393a27368a22d63a17883a141a132a14da133a15aa131d105dcd300000000c0000000d20000ea6002c382a26b31a177a26b32a176c0c0950b01c0c09ca36f6e65c2c0c000000000c2c0c0c0c000"

func TestCreateBatchFromBeforeCancelAfter(t *testing.T) {
	data, _ := hex.DecodeString(createBatchBeforeCancelAfter)
	dec, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := dec.(*CreateBatch)
	if !ok || c.Name != "n" || c.BillingProject != "p" || len(c.Jobs) != 2 || c.CancelAfterFailures != 0 {
		t.Fatalf("decoded %+v", dec)
	}
	// Its request digest is the one it had: a retry across the upgrade
	// matches the batch it made.
	c.Digest = nil
	want := digest(c.Name, c.BillingProject, c.Attributes, c.NJobs, c.Jobs)
	if hex.EncodeToString(c.RequestDigest()) != hex.EncodeToString(want) {
		t.Fatal("a request without cancel_after_n_failures digests differently than before the option")
	}
}
