package jobspec

import (
	"fmt"
	"strings"
	"testing"
)

// Attacks on gang groups in jobspecs (group "x" { gang = true }).

// TestAttackGangGroupJobspecDeadlockThroughOutsider: no member of the
// gang depends on another directly, but "rank" depends on "post", which
// depends on "launcher": the gang can only start once post ended, and
// post only once the gang ran. There is no cycle between jobs (findCycle
// passes), yet the batch would wait for ever: the jobspec must say so,
// as it does for a member depending on another member.
func TestAttackGangGroupJobspecDeadlockThroughOutsider(t *testing.T) {
	src := `
batch "deadlock" {
  job "post" {
    command    = ["post"]
    depends_on = ["launcher"]
  }

  group "mpi" {
    gang = true

    job "launcher" {
      command = ["mpirun"]
    }

    job "rank" {
      command    = ["rank"]
      depends_on = ["post"]
    }
  }
}
`
	b, diags := Parse("deadlock.hcl", []byte(src), nil)
	if diags.HasErrors() {
		return // refused: fixed
	}
	var parents []string
	for _, js := range b.JobSpecs() {
		parents = append(parents, fmt.Sprintf("%d %s <- %v", js.JobID, js.Name, js.ParentRanges))
	}
	t.Errorf("a gang group that waits on itself through job post was accepted (%v): its batch would never start the gang", parents)
}

// TestAttackGangGroupJobspecHolds pins what the jobspec does with gang
// groups (all hold): the batch's oom_retry and max_spot_attempts reach
// no member, however deep its group; a member's own oom_retry, a member
// depending on another through a nested group, a gang group inside
// another, a gang that is not a bool, are refused with a diagnostic.
func TestAttackGangGroupJobspecHolds(t *testing.T) {
	good := `
batch "ok" {
  max_spot_attempts = 3
  oom_retry {
    factor     = 2
    max_memory = "8GiB"
  }

  job "outside" {
    command = ["x"]
  }

  group "mpi" {
    gang = true

    group "a" {
      group "b" {
        job "deep" {
          command = ["d"]
          count   = 2
        }
      }
    }

    job "launcher" {
      command = ["l"]
    }
  }
}
`
	b, diags := Parse("ok.hcl", []byte(good), nil)
	if diags.HasErrors() {
		t.Fatalf("a gang group with nested members: %s", FormatDiagnostics(diags))
	}
	for _, js := range b.JobSpecs() {
		inGang := strings.HasPrefix(js.JobGroup, "mpi")
		if inGang && (js.OOMRetry != nil || js.MaxSpotAttempts != 0) {
			t.Errorf("member %q (group %s) took the batch's oom_retry %v / max_spot_attempts %d", js.Name, js.JobGroup, js.OOMRetry, js.MaxSpotAttempts)
		}
		if !inGang && (js.OOMRetry == nil || js.MaxSpotAttempts != 3) {
			t.Errorf("job %q outside the gang lost the batch's defaults", js.Name)
		}
	}
	for name, src := range map[string]string{
		"a member's own oom_retry": `
batch "x" {
  group "mpi" {
    gang = true
    job "a" { command = ["a"] }
    group "in" {
      job "b" {
        command = ["b"]
        oom_retry {
          factor     = 2
          max_memory = "8GiB"
        }
      }
    }
  }
}`,
		"a member depending on one in a nested group": `
batch "x" {
  group "mpi" {
    gang = true
    group "in" {
      job "a" { command = ["a"] }
    }
    job "b" {
      command    = ["b"]
      depends_on = ["a"]
    }
  }
}`,
		"a gang group in a gang group": `
batch "x" {
  group "mpi" {
    gang = true
    group "in" {
      gang = true
      job "a" {
        command = ["a"]
        count   = 2
      }
    }
  }
}`,
		"gang not a bool": `
batch "x" {
  group "mpi" {
    gang = "often"
    job "a" {
      command = ["a"]
      count   = 2
    }
  }
}`,
		"one member": `
batch "x" {
  group "mpi" {
    gang = true
    job "a" { command = ["a"] }
  }
}`,
	} {
		if _, diags := Parse("bad.hcl", []byte(src), nil); !diags.HasErrors() {
			t.Errorf("%s: accepted", name)
		}
	}
}
