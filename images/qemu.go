package images

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// UEFI firmware from Debian's ovmf and qemu-efi-aarch64 packages.
var uefi = map[string]struct{ code, vars string }{
	"amd64": {"/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
	"arm64": {"/usr/share/AAVMF/AAVMF_CODE.fd", "/usr/share/AAVMF/AAVMF_VARS.fd"},
}

// vmConfig is one qemu machine. Networking is qemu's user mode with host
// forwards bound to 127.0.0.1 only; run inside `unshare -n` so that the
// guest cannot reach anything beyond a private loopback (IMAGES.md: with
// restrict=on Debian's libslirp drops the guest's UDP replies).
type vmConfig struct {
	Arch    string
	Disk    string // raw disk image, written by the guest
	Vars    string // writable UEFI variable store of this machine
	Accel   string // kvm or tcg
	SIPPort int    // host UDP port forwarded to the guest's 5060
	APIPort int    // host TCP port forwarded to the guest's 8443
	Console string // file that receives the serial console
	Log     *slog.Logger
}

// vm is a running qemu with its serial console captured line by line.
type vm struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	started time.Time
	done    chan struct{}
	err     error

	mu    sync.Mutex
	lines []string
	at    []time.Duration // when each line arrived, from qemu start (power on)
	out   *os.File
}

func (c vmConfig) args() []string {
	fw := uefi[c.Arch]
	a := []string{"-nodefaults", "-nographic", "-display", "none", "-no-user-config", "-serial", "stdio", "-monitor", "none",
		// -smp 1: one run with -smp 2 hung with RCU stalls under TCG and load (IMAGES.md).
		"-smp", "1",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + fw.code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + c.Vars,
		"-drive", "if=none,id=disk,format=raw,cache=writeback,file=" + c.Disk,
		"-device", "virtio-blk-pci,drive=disk",
		"-netdev", fmt.Sprintf("user,id=net,hostfwd=udp:127.0.0.1:%d-:%d,hostfwd=tcp:127.0.0.1:%d-:%d", c.SIPPort, SIPPort, c.APIPort, MgmtPort),
		// romfile= skips the iPXE option ROM and its prompt (~3 s).
		"-device", "virtio-net-pci,netdev=net,romfile=",
	}
	switch c.Arch {
	case "amd64":
		// GRUB 2.06 runs out of memory loading a kernel from squashfs with 256 MiB.
		a = append(a, "-M", "q35", "-m", "512")
	case "arm64":
		a = append(a, "-M", "virt", "-m", "1024")
	}
	if c.Accel == "kvm" {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", "tcg")
		if c.Arch == "arm64" {
			a = append(a, "-cpu", "cortex-a57")
		}
	}
	return a
}

// startVM starts qemu; ctx and bound limit its whole life.
func startVM(ctx context.Context, c vmConfig, bound time.Duration) (*vm, error) {
	ctx, cancel := context.WithTimeout(ctx, bound)
	out, err := os.OpenFile(c.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		cancel()
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "qemu-system-"+qemuArch(c.Arch), c.args()...)
	cmd.Stdin = nil
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.WaitDelay = 5 * time.Second
	c.Log.Debug("qemu", "args", strings.Join(cmd.Args, " "))
	v := &vm{cmd: cmd, cancel: cancel, done: make(chan struct{}), out: out}
	fmt.Fprintf(out, "\n===== qemu start %s =====\n", time.Now().UTC().Format(time.RFC3339))
	if err := cmd.Start(); err != nil {
		cancel()
		out.Close()
		return nil, fmt.Errorf("images: qemu: %w", err)
	}
	v.started = time.Now()
	readerDone := make(chan struct{})
	go func() { // owned: ends when qemu's output closes, which Wait below forces
		defer close(readerDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			at := time.Since(v.started)
			v.mu.Lock()
			v.lines = append(v.lines, line)
			v.at = append(v.at, at)
			fmt.Fprintf(v.out, "[%7.2f] %s\n", at.Seconds(), line)
			v.mu.Unlock()
		}
		io.Copy(io.Discard, pr)
	}()
	go func() { // owned: reaps qemu; stop() waits for it
		v.err = cmd.Wait()
		pw.Close()
		<-readerDone
		out.Close()
		close(v.done)
	}()
	return v, nil
}

// stop kills qemu (a power cut for the guest) and waits for it.
func (v *vm) stop() {
	if v.cmd.Process != nil {
		v.cmd.Process.Kill()
	}
	<-v.done
	v.cancel()
}

// mark is a position in the console, for waiting on lines after it.
func (v *vm) mark() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.lines)
}

// waitConsole waits for a console line after position from that matches
// re, returning its index and submatches.
func (v *vm) waitConsole(ctx context.Context, from int, re *regexp.Regexp) (int, []string, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		v.mu.Lock()
		for i := from; i < len(v.lines); i++ {
			if m := re.FindStringSubmatch(v.lines[i]); m != nil {
				v.mu.Unlock()
				return i, m, nil
			}
		}
		from = len(v.lines)
		v.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, nil, fmt.Errorf("console: no line matching %q: %w", re, ctx.Err())
		case <-v.done:
			return 0, nil, fmt.Errorf("console: qemu exited (%v) before a line matching %q", v.err, re)
		case <-t.C:
		}
	}
}

// tailConsole is the last n console lines, for failure reports.
func (v *vm) tailConsole(n int) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	i := max(0, len(v.lines)-n)
	return strings.Join(v.lines[i:], "\n")
}

// accel picks kvm when asked, or when auto, /dev/kvm opens, the guest has
// the host's architecture and the CPU shows vmx or svm (a /dev/kvm under
// nested virtualization without them fails at the first instructions);
// tcg otherwise.
func accel(want, arch string) string {
	switch want {
	case "kvm", "tcg":
		return want
	}
	if arch != hostArch() {
		return "tcg"
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	cpu, _ := os.ReadFile("/proc/cpuinfo")
	if !regexp.MustCompile(`(?m)^flags\s*:.*\b(vmx|svm)\b`).Match(cpu) {
		return "tcg"
	}
	return "kvm"
}

// freePorts returns a free UDP port and a free TCP port on 127.0.0.1.
func freePorts() (udp, tcp int, err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer pc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer ln.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port, ln.Addr().(*net.TCPAddr).Port, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
