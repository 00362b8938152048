// Command jobtool is the one program in drover's test images: a static
// binary whose subcommands do what container tests need a job to do (exit
// with a status, use memory or CPU, probe paths, leave a child behind).
// It uses only the standard library so that testimage.Build can compile it
// from its embedded source anywhere.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

const usage = `usage: jobtool COMMAND [ARGS]
  true | false | exit N | echo ARGS... | env | id
  cat FILE | write FILE TEXT | copy SRC DST (making DST's directory)
  alloc MIB | spin SECONDS | sleep SECONDS
  probe PATH...            exit 0 only if no PATH is readable
  setsid-child SECONDS FILE  leave a child in a new session that writes FILE after SECONDS
  ls DIR                   print the names in DIR, one a line
  dial ADDR...             connect to each TCP ADDR (2 s each) and print the line it sends;
                           exit with the number of addresses reached
  serve ADDR LINE          listen on TCP ADDR, print "listening", answer each connection with LINE
  fake-registry ADDR redirect URL | hold
                           serve HTTP on ADDR as a registry would /v2/, and answer every other
                           request with a redirect to URL and its path, or hold it unanswered
  mq-make NAME             create the POSIX message queue /NAME (mode 0644)
  mq-find NAME             print "found" if the POSIX message queue /NAME opens, else "absent"
  deny CALL...             try each system call (unshare-user clone-user keyctl userfaultfd
                           io_uring perf_event); exit 0 only if every one was refused`

func main() {
	if len(os.Args) < 2 {
		fail(2, usage)
	}
	os.Exit(run(os.Args[1], os.Args[2:]))
}

func run(cmd string, args []string) int {
	switch cmd {
	case "true":
		return 0
	case "false":
		return 1
	case "exit":
		need(args, 1)
		n, err := strconv.Atoi(args[0])
		check(err)
		return n
	case "echo":
		fmt.Println(strings.Join(args, " "))
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
	case "id":
		fmt.Printf("uid=%d gid=%d\n", os.Getuid(), os.Getgid())
	case "cat":
		need(args, 1)
		b, err := os.ReadFile(args[0])
		check(err)
		os.Stdout.Write(b)
	case "write":
		need(args, 2)
		check(os.MkdirAll(filepath.Dir(args[0]), 0o755))
		check(os.WriteFile(args[0], []byte(args[1]), 0o644))
	case "copy":
		need(args, 2)
		b, err := os.ReadFile(args[0])
		check(err)
		check(os.MkdirAll(filepath.Dir(args[1]), 0o755))
		check(os.WriteFile(args[1], b, 0o644))
	case "alloc":
		need(args, 1)
		n, err := strconv.Atoi(args[0])
		check(err)
		alloc(n)
	case "spin":
		need(args, 1)
		spin(seconds(args[0]))
	case "sleep":
		need(args, 1)
		time.Sleep(time.Duration(seconds(args[0]) * float64(time.Second)))
	case "probe":
		return probe(args)
	case "setsid-child":
		need(args, 2)
		self, err := os.Executable()
		if err != nil {
			self = os.Args[0]
		}
		c := exec.Command(self, "sleep-write", args[0], args[1])
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		check(c.Start())
		fmt.Println("child", c.Process.Pid)
	case "ls":
		need(args, 1)
		names, err := os.ReadDir(args[0])
		check(err)
		for _, n := range names {
			fmt.Println(n.Name())
		}
	case "dial":
		return dial(args)
	case "serve":
		need(args, 2)
		l, err := net.Listen("tcp", args[0])
		check(err)
		fmt.Println("listening", l.Addr())
		for {
			c, err := l.Accept()
			check(err)
			fmt.Fprintln(c, args[1])
			c.Close()
		}
	case "fake-registry":
		need(args, 2)
		l, err := net.Listen("tcp", args[0])
		check(err)
		fmt.Println("listening", l.Addr())
		check(http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v2/":
			case args[1] == "redirect" && len(args) > 2:
				http.Redirect(w, r, args[2]+r.URL.Path, http.StatusFound)
			default:
				<-r.Context().Done()
			}
		})))
	case "mq-make", "mq-find":
		need(args, 1)
		return mq(cmd == "mq-make", args[0])
	case "deny":
		return deny(args)
	case "sleep-write": // the child of setsid-child
		need(args, 2)
		time.Sleep(time.Duration(seconds(args[0]) * float64(time.Second)))
		check(os.WriteFile(args[1], []byte("child survived\n"), 0o644))
	default:
		fail(2, usage)
	}
	return 0
}

// alloc allocates and touches mib MiB, one MiB at a time, so that the
// memory is resident and a lower memory limit kills the process.
func alloc(mib int) {
	var chunks [][]byte
	for range mib {
		c := make([]byte, 1<<20)
		for j := 0; j < len(c); j += 4096 {
			c[j] = 1
		}
		chunks = append(chunks, c)
	}
	time.Sleep(200 * time.Millisecond)
	fmt.Printf("allocated %d MiB\n", len(chunks))
}

// spin burns CPU on two goroutines for secs wall seconds and prints the
// CPU seconds the process used.
func spin(secs float64) {
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for time.Now().Before(end) {
				for i := 0; i < 100000; i++ {
					x += i
				}
			}
			_ = x
		}()
	}
	wg.Wait()
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("cpu %.2f\n", cpu.Seconds())
}

// probe tries to read each path; it succeeds only if none was readable.
func probe(paths []string) int {
	code := 0
	for _, p := range paths {
		var err error
		if fi, serr := os.Stat(p); serr != nil {
			err = serr
		} else if fi.IsDir() {
			_, err = os.ReadDir(p)
		} else {
			var f *os.File
			if f, err = os.Open(p); err == nil {
				_, err = f.Read(make([]byte, 1))
				if err == io.EOF {
					err = nil
				}
				f.Close()
			}
		}
		if err != nil {
			fmt.Printf("denied %s: %v\n", p, err)
			continue
		}
		fmt.Printf("readable %s\n", p)
		code = 1
	}
	return code
}

// dial connects to each address and prints the first line it sends; it
// returns the number of addresses reached.
func dial(addrs []string) int {
	n := 0
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			fmt.Printf("unreachable %s: %v\n", a, err)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		fmt.Printf("reached %s: %s\n", a, strings.TrimSpace(line))
		n++
	}
	return min(n, 100)
}

// Linux system call numbers the syscall package lacks, by GOARCH.
var sysnum = map[string]map[string]uintptr{
	"amd64": {"userfaultfd": 323, "io_uring_setup": 425, "perf_event_open": 298},
	"arm64": {"userfaultfd": 282, "io_uring_setup": 425, "perf_event_open": 241},
}

// deny tries each call and reports whether the kernel refused it; it
// returns 0 only if every one was refused.
func deny(calls []string) int {
	code := 0
	for _, call := range calls {
		err := try(call)
		if err != nil {
			fmt.Printf("denied %s: %v\n", call, err)
			continue
		}
		fmt.Printf("allowed %s\n", call)
		code = 1
	}
	return code
}

// try makes one system call an unprivileged process can make unless a
// seccomp filter or its chroot keeps it from it.
func try(call string) error {
	nums := sysnum[runtime.GOARCH]
	errno := func(r1 uintptr, e syscall.Errno) error {
		if e != 0 {
			return e
		}
		if int(r1) >= 0 {
			syscall.Close(int(r1)) // an fd, for the calls that make one
		}
		return nil
	}
	switch call {
	case "unshare-user", "clone-user":
		// A child in a user namespace of its own, mapped to root in it
		// (a Go process has threads, so unshare(2) itself would say
		// EINVAL whatever the filter: the child is made by clone).
		self, err := os.Executable()
		if err != nil {
			return err
		}
		c := exec.Command(self, "true")
		c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}}
		return c.Run()
	case "keyctl":
		// KEYCTL_GET_KEYRING_ID of the session keyring, made if missing.
		r1, _, e := syscall.RawSyscall(syscall.SYS_KEYCTL, 0, ^uintptr(2), 1)
		if e != 0 {
			return e
		}
		_ = r1
		return nil
	case "userfaultfd":
		r1, _, e := syscall.RawSyscall(nums["userfaultfd"], syscall.O_CLOEXEC|1, 0, 0) // UFFD_USER_MODE_ONLY
		return errno(r1, e)
	case "io_uring":
		var params [120]byte
		r1, _, e := syscall.RawSyscall(nums["io_uring_setup"], 1, uintptr(unsafe.Pointer(&params[0])), 0)
		return errno(r1, e)
	case "perf_event":
		// A software clock of this process, user space only.
		var attr [128]byte
		binary.NativeEndian.PutUint32(attr[0:], 1)     // PERF_TYPE_SOFTWARE
		binary.NativeEndian.PutUint32(attr[4:], 128)   // size
		binary.NativeEndian.PutUint64(attr[40:], 0x60) // exclude_kernel | exclude_hv
		r1, _, e := syscall.RawSyscall6(nums["perf_event_open"], uintptr(unsafe.Pointer(&attr[0])), 0, ^uintptr(0), ^uintptr(0), 0, 0)
		return errno(r1, e)
	}
	return fmt.Errorf("unknown call %q", call)
}

func seconds(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	check(err)
	return f
}

func need(args []string, n int) {
	if len(args) < n {
		fail(2, usage)
	}
}

func check(err error) {
	if err != nil {
		fail(1, "jobtool: "+err.Error())
	}
}

func fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(code)
}

// mq creates (make) or opens the POSIX message queue /name through
// mq_open, as glibc's mq_open does (the name without its slash).
func mq(make bool, name string) int {
	p, err := syscall.BytePtrFromString(name)
	check(err)
	flags := syscall.O_RDONLY
	if make {
		flags = syscall.O_RDWR | syscall.O_CREAT
	}
	fd, _, errno := syscall.Syscall6(syscall.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(flags), 0o644, 0, 0, 0)
	switch {
	case errno == 0:
		syscall.Close(int(fd))
		if !make {
			fmt.Println("found")
		}
	case make:
		fail(1, fmt.Sprintf("mq_open %s: %v", name, errno))
	default:
		fmt.Println("absent")
	}
	return 0
}
