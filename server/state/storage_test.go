package state

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-sched/drover/api"
)

func fileSpec(name string, inputs, outputs []string) *Spec {
	sp := spec(name, 1)
	sp.Run = &Run{}
	for i, u := range inputs {
		sp.Run.Inputs = append(sp.Run.Inputs, File{Name: "in" + string(rune('a'+i)), URL: u, Path: "in" + string(rune('a'+i))})
	}
	for i, u := range outputs {
		sp.Run.Outputs = append(sp.Run.Outputs, File{Name: "out" + string(rune('a'+i)), URL: u, Path: "out" + string(rune('a'+i))})
	}
	return sp
}

// TestStoragePrefixes: an admin's prefixes are kept canonical, sorted,
// bounded in number and size, replaced by URL, removed; listings show the
// kind of credentials, never the sealed bytes; snapshots and replays keep
// them.
func TestStoragePrefixes(t *testing.T) {
	h := newHarness(t)
	sealed := []byte("\x01sealed-bytes-of-a-key")
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://b/projA", AddedBy: "root"}})
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "s3://b/x", Kind: api.CredentialsS3Keys, Sealed: sealed,
		S3Endpoint: "http://127.0.0.1:9000", S3Region: "us-east-1", S3PathStyle: true}})
	for _, bad := range []StoragePrefix{
		{URL: "gs://b/projA/"},     // not canonical
		{URL: "gs://b/p?region=x"}, // a query
		{URL: "file:///"},          // everything
		{URL: "gs://b/q", Kind: api.CredentialsGCSServiceAccount}, // kind without credentials
		{URL: "gs://b/q", Sealed: sealed},                         // credentials without kind
		{URL: "gs://b/q", Kind: "password", Sealed: sealed},       // unknown kind
		{URL: "gs://b/q", Kind: api.CredentialsGCSServiceAccount, Sealed: make([]byte, MaxSealedBytes+1)},
		{URL: "gs://b/q", S3Region: "us-east-1"}, // s3 settings on gs
		{URL: "s3://b/q", S3Endpoint: "ftp://x"},
	} {
		h.MustFail(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: bad}, ErrInvalid)
	}
	h.MustFail(&SetStoragePrefix{Now: h.Tick(), Project: "nope", Prefix: StoragePrefix{URL: "gs://b/q"}}, ErrNotFound)
	// Replacing keeps one entry.
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://b/projA", AddedBy: "root"}})
	list, _ := h.S.StoragePrefixes("default")
	if len(list) != 2 || list[0].URL != "gs://b/projA" || list[0].Kind != "" ||
		list[1].Kind != api.CredentialsS3Keys || list[1].Sealed != nil || !list[1].S3PathStyle {
		t.Fatalf("prefixes: %+v", list)
	}
	// The bound.
	for i := len(list); i < api.MaxStoragePrefixes; i++ {
		h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://many/p" + strconv.Itoa(i)}})
	}
	err := h.MustFail(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://one/too-many"}}, ErrConflict)
	if !strings.Contains(err.Msg, "32 storage prefixes") {
		t.Fatalf("over the bound: %q", err.Msg)
	}
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://b/projA"}}) // a replacement still fits
	h.Must(&RemoveStoragePrefix{Project: "default", URL: "gs://many/p2"})
	h.MustFail(&RemoveStoragePrefix{Project: "default", URL: "gs://many/p2"}, ErrNotFound)

	p, _ := h.S.BillingProject("default")
	if len(p.Storage) != api.MaxStoragePrefixes-1 {
		t.Fatalf("project shows %d prefixes", len(p.Storage))
	}
	// Snapshot and replay hold the same prefixes, sealed bytes included.
	snap := SnapshotBytes(t, h.S)
	if !bytes.Contains(snap, sealed) {
		t.Fatal("the snapshot lost the sealed credentials")
	}
	restored := New()
	if err := restored.Restore(bytes.NewReader(snap)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(SnapshotBytes(t, restored), snap) || !bytes.Equal(SnapshotBytes(t, h.Replay()), snap) {
		t.Fatal("restore or replay differ from the state")
	}
}

// TestJobsOnlyUnderTheirPrefixes: apply refuses (403) a job whose file is
// under none of its project's prefixes, by whole path segments, in a
// new batch, an update and a bunch; entries from before the rule apply as
// they did; a project may not use another project's prefix.
func TestJobsOnlyUnderTheirPrefixes(t *testing.T) {
	h := newHarness(t)
	h.Must(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "a"})
	h.Must(&CreateUser{Now: h.Tick(), Name: "bob", TokenHash: "b"})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "projA", Members: []string{"alice"}})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "projB", Members: []string{"bob"}})
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "projA", Prefix: StoragePrefix{URL: "file:///bucket/projA"}})
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "projB", Prefix: StoragePrefix{URL: "file:///bucket/projB"}})
	create := func(user, project string, sp *Spec) *CreateBatch {
		return &CreateBatch{Now: h.Tick(), User: user, BillingProject: project, Jobs: []JobEntry{entry(1, 2, sp)}, Policy: PolicyStorage}
	}
	h.Must(create("alice", "projA", fileSpec("ok", []string{"file:///bucket/projA/in-$DROVER_INDEX.txt"}, []string{"file:///bucket/projA/out/r.txt"})))
	for _, c := range []struct {
		user, project string
		sp            *Spec
		kind          ErrorKind
		msg           string
	}{
		{"bob", "projB", fileSpec("steal", []string{"file:///bucket/projA/in-0.txt"}, nil), ErrForbidden, `"file:///bucket/projA/in-0.txt" is under none of billing project projB's 1 storage prefixes`},
		{"bob", "projB", fileSpec("overwrite", nil, []string{"file:///bucket/projA/out/r.txt"}), ErrForbidden, `output "outa"`},
		{"alice", "projA", fileSpec("neighbour", []string{"file:///bucket/projAB/x"}, nil), ErrForbidden, "projAB"},
		{"alice", "projA", fileSpec("dots", []string{"file:///bucket/projA/../projB/x"}, nil), ErrInvalid, `".." path segment`},
		{"alice", "projA", fileSpec("query", []string{"file:///bucket/projA/x?metadata=skip"}, nil), ErrInvalid, "query parameters"},
	} {
		err := h.MustFail(create(c.user, c.project, c.sp), c.kind)
		if !strings.Contains(err.Msg, c.msg) || !strings.Contains(err.Msg, c.sp.Name) {
			t.Errorf("%s: %q, want %q", c.sp.Name, err.Msg, c.msg)
		}
	}
	// An entry from before the rule (PolicyNone) applies as it did.
	old := create("bob", "projB", fileSpec("old", []string{"gs://anywhere/x"}, nil))
	old.Policy = PolicyNone
	h.Must(old)

	// Updates and bunches are checked too.
	b := h.Must(create("bob", "projB", fileSpec("first", []string{"file:///bucket/projB/a"}, nil))).(*UpdateResult).Batch
	h.MustFail(&CreateUpdate{Now: h.Tick(), Batch: b, Jobs: []JobEntry{entry(1, 1, fileSpec("u", []string{"file:///bucket/projA/a"}, nil))}, Policy: PolicyStorage, User: "bob"}, ErrForbidden)
	ur := h.Must(&CreateUpdate{Now: h.Tick(), Batch: b, NJobs: 2, Policy: PolicyStorage, User: "bob"}).(*UpdateResult)
	h.MustFail(&AddJobs{Now: h.Tick(), Batch: b, Update: ur.Update, Jobs: []JobEntry{entry(1, 2, fileSpec("bunch", nil, []string{"file:///bucket/projA/x"}))}, Policy: PolicyStorage, User: "bob"}, ErrForbidden)
	good := []JobEntry{entry(1, 2, fileSpec("bunch", nil, []string{"file:///bucket/projB/x"}))}
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: ur.Update, Jobs: good, Policy: PolicyStorage, User: "bob"})
	// Once the prefix is gone, a retried bunch is still the same bunch.
	h.Must(&RemoveStoragePrefix{Project: "projB", URL: "file:///bucket/projB"})
	h.Must(&AddJobs{Now: h.Tick(), Batch: b, Update: ur.Update, Jobs: good, Policy: PolicyStorage, User: "bob"})
	h.MustFail(create("bob", "projB", fileSpec("after", []string{"file:///bucket/projB/a"}, nil)), ErrForbidden)
}

// TestHostNetworkIsAProjectSetting: a member's job on network "host" is
// refused unless the project allows it; an admin's never is.
func TestHostNetworkIsAProjectSetting(t *testing.T) {
	h := newHarness(t)
	h.Must(&CreateUser{Now: h.Tick(), Name: "alice", TokenHash: "a"})
	h.Must(&CreateBillingProject{Now: h.Tick(), Name: "lab", Members: []string{"alice", "root"}})
	host := spec("net", 1)
	host.Run = &Run{Image: "reg/tool:1", Network: api.NetworkHost}
	create := func(user string) *CreateBatch {
		return &CreateBatch{Now: h.Tick(), User: user, BillingProject: "lab", Jobs: []JobEntry{entry(1, 1, host)}, Policy: PolicyStorage}
	}
	err := h.MustFail(create("alice"), ErrForbidden)
	if !strings.Contains(err.Msg, "billing project lab") || !strings.Contains(err.Msg, "allow_host_network") {
		t.Fatalf("refusal: %q", err.Msg)
	}
	h.Must(create("root"))
	yes, no := true, false
	h.Must(&SetProjectSettings{Project: "lab", AllowHostNetwork: &yes})
	h.Must(create("alice"))
	if p, _ := h.S.BillingProject("lab"); !p.AllowHostNetwork {
		t.Fatal("the setting is not shown")
	}
	h.Must(&SetProjectSettings{Project: "lab"}) // nothing changes
	h.Must(create("alice"))
	h.Must(&SetProjectSettings{Project: "lab", AllowHostNetwork: &no})
	h.MustFail(create("alice"), ErrForbidden)
	h.MustFail(&SetProjectSettings{Project: "nope", AllowHostNetwork: &yes}, ErrNotFound)
}

// TestStorageFor: an attempt is handed the prefixes its files lie under,
// each once, the longest for each file, with the sealed credentials; a
// file under none gets nothing.
func TestStorageFor(t *testing.T) {
	h := newHarness(t)
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://b/p"}})
	h.Must(&SetStoragePrefix{Now: h.Tick(), Project: "default", Prefix: StoragePrefix{URL: "gs://b/p/special", Kind: api.CredentialsGCSServiceAccount, Sealed: []byte("k")}})
	got := h.S.StorageFor("default", []string{"gs://b/p/1", "gs://b/p/2", "gs://b/p/special/x", "gs://b/q/x", "gs://b/p/x?y=1"})
	if len(got) != 2 || got[0].URL != "gs://b/p" || got[1].URL != "gs://b/p/special" || string(got[1].Sealed) != "k" {
		t.Fatalf("grants: %+v", got)
	}
	if got := h.S.StorageFor("default", []string{"gs://b/q/x"}); len(got) != 0 {
		t.Fatalf("a file under no prefix got %+v", got)
	}
	if got := h.S.StorageFor("nope", []string{"gs://b/p/1"}); len(got) != 0 {
		t.Fatalf("an unknown project got %+v", got)
	}
}
