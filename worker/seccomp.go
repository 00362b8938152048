package worker

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deniedSyscalls are the system calls a process job may not make: those
// that create or enter namespaces or change mounts (a job that made a user
// namespace of its own would be root in it and reach kernel code no
// unprivileged caller reaches), and the kernel interfaces Docker's default
// profile keeps from containers that most often held the bugs jobs would
// use to climb out (keyrings, BPF, userfaultfd, perf events, io_uring),
// or that only an administrator has a use for (modules, kexec, swap,
// clocks, quotas, reboot). Most of them need capabilities a job does not
// have anyway: the filter is the second wall, the job's user and its
// chroot the first. ptrace, kcmp and process_vm_readv/writev stay: the
// kernel lets a job trace only processes of its own user, and every job
// runs as a user of its own, so debuggers and strace work inside a job.
var deniedSyscalls = []string{
	"unshare", "setns", "mount", "umount2", "pivot_root",
	"move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"keyctl", "add_key", "request_key",
	"bpf", "userfaultfd", "perf_event_open",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"create_module", "get_kernel_syms", "query_module",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
	"iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
	"lookup_dcookie", "open_by_handle_at", "name_to_handle_at", "nfsservctl",
	"uselib", "ustat", "sysfs", "_sysctl", "vhangup",
}

// namespaceFlags are clone's flags that make new namespaces.
var namespaceFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
}

// processFilter is the seccomp filter a process job runs under: every
// system call is allowed but deniedSyscalls (EPERM), clone with a
// namespace flag (EPERM) and, unless allowClone3, clone3 (ENOSYS, which
// tells C libraries to fall back to clone, whose flags a filter can see:
// clone3's are behind a pointer). The worker's thread that forks a job on
// cgroup v2 calls clone3 itself (CLONE_INTO_CGROUP) and passes its filter
// on, so there allowClone3 is true and clone3's flags go unchecked; the
// job's chroot still keeps it from making a user namespace (the kernel
// refuses one to a chrooted process), and without one it has no
// capability to make any other. A system call of another ABI than the
// worker's own (a 64-bit x86 process can make 32-bit calls through int
// 0x80, numbered differently) kills the process: it would otherwise pass
// a filter written for native numbers.
func processFilter(allowClone3 bool) (*unix.SockFprog, error) {
	var clone []seccomp.NameWithConditions
	for _, f := range namespaceFlags {
		clone = append(clone, seccomp.NameWithConditions{Name: "clone",
			Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: f}}})
	}
	groups := []seccomp.SyscallGroup{
		{Names: deniedSyscalls, Action: seccomp.ActionErrno},
		{NamesWithCondtions: clone, Action: seccomp.ActionErrno},
	}
	if !allowClone3 {
		groups = append(groups, seccomp.SyscallGroup{Names: []string{"clone3"}, Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)})
	}
	policy := seccomp.Policy{DefaultAction: seccomp.ActionAllow, Syscalls: groups}
	insts, err := policy.Assemble()
	if err != nil {
		return nil, fmt.Errorf("job seccomp filter: %w", err)
	}
	native, err := arch.GetInfo("")
	if err != nil {
		return nil, fmt.Errorf("job seccomp filter: %w", err)
	}
	// seccomp_data: nr at offset 0, arch at 4.
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(native.ID), SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}
	raw, err := bpf.Assemble(append(guard, insts...))
	if err != nil {
		return nil, fmt.Errorf("job seccomp filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}, nil
}

// loadFilter sets no_new_privs on the calling thread (no setuid program
// a job runs gains anything) and installs filter on it; both pass to every
// process it forks. The thread keeps them until it ends.
func loadFilter(filter *unix.SockFprog) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(filter))); errno != 0 {
		return fmt.Errorf("install the jobs' seccomp filter: %w", errno)
	}
	return nil
}

// containerSeccomp is Docker's default seccomp profile for a container
// with the capabilities spec gives its process, in the form runc takes:
// an allow list of system calls (with the argument checks Docker makes),
// everything else refused with EPERM.
func containerSeccomp(spec *specs.Spec) (*specs.LinuxSeccomp, error) {
	sc, err := mobyseccomp.GetDefaultProfile(spec)
	if err != nil {
		return nil, fmt.Errorf("container seccomp profile: %w", err)
	}
	return sc, nil
}
