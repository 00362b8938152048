// Command jobtool is the one program in drover's test images: a static
// binary whose subcommands do what container tests need a job to do (exit
// with a status, use memory or CPU, probe paths, leave a child behind).
// It uses only the standard library so that testimage.Build can compile it
// from its embedded source anywhere.
package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const usage = `usage: jobtool COMMAND [ARGS]
  true | false | exit N | echo ARGS... | env | id
  cat FILE | write FILE TEXT | copy SRC DST (making DST's directory)
  alloc MIB | spin SECONDS | sleep SECONDS
  probe PATH...            exit 0 only if no PATH is readable
  setsid-child SECONDS FILE  leave a child in a new session that writes FILE after SECONDS`

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
