package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopTimeout bounds how long a process may take to exit after SIGTERM
// before its group is killed.
const stopTimeout = 10 * time.Second

// process is a server the harness started, in a process group of its own so
// that stopping it also stops its children (nginx's workers).
type process struct {
	name string
	log  string // its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result; read after done is closed
}

// startProcess starts argv pinned to cpus (taskset -c; "" = not pinned),
// output to workdir/<name>.log. Its environment is the harness's without
// the COLLAPSER_ and HELLO_ settings of the caller's shell, plus env: every
// run starts from the binaries' defaults. It records the process group in
// workdir/pgids, for the script to kill should the harness itself be killed.
func startProcess(workdir, name, cpus string, env []string, argv ...string) (*process, error) {
	argv = pinned(cpus, argv)
	logPath := filepath.Join(workdir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(serverEnv(os.Environ()), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig: killed with the harness.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, argv[0], err)
	}
	p := &process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := appendLine(filepath.Join(workdir, "pgids"), fmt.Sprint(cmd.Process.Pid)); err != nil {
		return p, errors.Join(err, p.stop())
	}
	return p, nil
}

// pid is the process's id, which is also its process group's.
func (p *process) pid() int {
	return p.cmd.Process.Pid
}

// exitErr reports whether the process has exited, and how.
func (p *process) exitErr() (exited bool, err error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group and waits for the process to exit;
// after stopTimeout the group is killed. A process that had already exited
// by itself is an error: it failed during the benchmark.
func (p *process) stop() error {
	if exited, err := p.exitErr(); exited {
		return fmt.Errorf("%s exited early (%v); log %s", p.name, err, p.log)
	}
	pgid := p.pid()
	// The group exists until its last member exits; an error here means it
	// is already gone.
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// nginx's master may exit before its workers: make sure none is left.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return nil
}

// appendLine appends line and a newline to the file at path.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("record in %s: %w", path, err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return fmt.Errorf("record in %s: %w", path, err)
	}
	return f.Close()
}

// serverEnv returns environ without the variables that configure collapser
// (COLLAPSER_*) and the hello backend (HELLO_*).
func serverEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "COLLAPSER_") && !strings.HasPrefix(kv, "HELLO_") {
			out = append(out, kv)
		}
	}
	return out
}
