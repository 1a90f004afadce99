package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The brokers this machine runs (scripts/ensure-brokers.sh starts them where missing).
const (
	NATSAddr     = "127.0.0.1:4222"
	RabbitMQAddr = "127.0.0.1:5672"
)

func answers(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return fmt.Errorf("%w (run scripts/ensure-brokers.sh)", err)
	}
	return c.Close()
}

// NATSURL is the shared NATS server with JetStream; each test uses its own stream.
func NATSURL(t testing.TB) string {
	t.Helper()
	Need(t, "NATS with JetStream on "+NATSAddr, answers(NATSAddr))
	return "nats://" + NATSAddr
}

// RandomName is a name no other test uses: a stream, a subject, an exchange.
func RandomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// RabbitMQVhost makes a vhost of its own for the test on the shared RabbitMQ (guest may use
// it) and returns its amqp URL; the vhost goes with the test.
func RabbitMQVhost(t testing.TB) string {
	t.Helper()
	Need(t, "RabbitMQ on "+RabbitMQAddr, answers(RabbitMQAddr))
	ctl, err := exec.LookPath("rabbitmqctl")
	Need(t, "rabbitmqctl (to make the test's vhost)", err)
	vhost := RandomName("mailhook-test-")
	for _, args := range [][]string{{"add_vhost", vhost}, {"set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"}} {
		if out, err := exec.Command(ctl, args...).CombinedOutput(); err != nil {
			t.Fatalf("rabbitmqctl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command(ctl, "delete_vhost", vhost).Run() })
	return "amqp://guest:guest@" + RabbitMQAddr + "/" + vhost
}

// NATSServer is a nats-server of the test's own, with JetStream and a store directory that
// outlives a restart, so a test can stop and start it without touching the shared one.
type NATSServer struct {
	t    testing.TB
	bin  string
	addr string
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	// exited is closed when cmd has exited.
	exited chan struct{}
}

// StartNATS starts a nats-server of the test's own; t.Cleanup stops it.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	Need(t, "nats-server (scripts/ensure-brokers.sh installs it)", err)
	s := &NATSServer{t: t, bin: bin, addr: FreeHostPort(t), dir: t.TempDir()}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// URL is the server's nats:// URL.
func (s *NATSServer) URL() string { return "nats://" + s.addr }

// Start starts the server (again) on its port and store, and waits until it answers.
func (s *NATSServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	host, port, _ := net.SplitHostPort(s.addr)
	log, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(s.bin, "-a", host, "-p", port, "-js", "-sd", filepath.Join(s.dir, "js"))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	// Progress is the server's CPU time and log: a JetStream store recovered after a restart, on
	// a loaded machine, may take a while, and only a server that does nothing fails the wait.
	err = Wait("nats-server to answer on "+s.addr, Stall, func() (int64, bool, error) {
		select {
		case <-exited:
			return 0, false, errors.New("nats-server exited")
		default:
		}
		return cpuTicks(cmd.Process.Pid) + treeBytes(filepath.Join(s.dir, "server.log")), answers(s.addr) == nil, nil
	})
	if err != nil {
		out, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
		s.t.Fatalf("%v: %s", err, lastLine(string(out)))
	}
}

// Stop stops the server (SIGTERM: it flushes its store), and waits for it to exit.
func (s *NATSServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// RabbitMQNode is a RabbitMQ node of the test's own (its own name, ports, config and data
// directory), so a test can stop and start it without touching the shared one.
type RabbitMQNode struct {
	t    testing.TB
	name string
	addr string
	dir  string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// StartRabbitMQ starts a RabbitMQ node of the test's own; t.Cleanup stops it.
func StartRabbitMQ(t testing.TB) *RabbitMQNode {
	t.Helper()
	_, err := exec.LookPath("rabbitmq-server")
	Need(t, "rabbitmq-server (scripts/ensure-brokers.sh installs it)", err)
	dir, err := os.MkdirTemp("", "mailhook-rabbitmq-")
	if err != nil {
		t.Fatal(err)
	}
	// The server drops to the rabbitmq user, which must be able to write here.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	addr, dist := FreeHostPort(t), FreeHostPort(t)
	_, distPort, _ := net.SplitHostPort(dist)
	n := &RabbitMQNode{t: t, name: RandomName("mhtest") + "@localhost", addr: addr, dir: dir}
	files := map[string]string{"rabbitmq.conf": "listeners.tcp.1 = " + addr + "\n", "enabled_plugins": "[].\n"}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.env = append(os.Environ(), "RABBITMQ_NODENAME="+n.name, "RABBITMQ_DIST_PORT="+distPort,
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq.conf"), "RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"), "RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"))
	n.Start()
	t.Cleanup(func() { n.Stop(); _ = os.RemoveAll(dir) })
	return n
}

// URL is the node's amqp URL (guest, default vhost).
func (n *RabbitMQNode) URL() string { return "amqp://guest:guest@" + n.addr + "/" }

// Start starts the node (again) on its port and data, and waits until it answers.
func (n *RabbitMQNode) Start() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	log, err := os.OpenFile(filepath.Join(n.dir, "server.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("rabbitmq-server")
	cmd.Env, cmd.Stdout, cmd.Stderr = n.env, log, log
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start rabbitmq-server: %v", err)
	}
	n.cmd = cmd
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	// Progress is what the node writes as it boots (its logs, its Mnesia and message store):
	// the Erlang VM's boot takes many seconds of CPU, and on a loaded machine more than a minute
	// may pass before it answers; only a node that has stopped writing fails the wait.
	err = Wait("rabbitmq node "+n.name+" to answer on "+n.addr, Stall, func() (int64, bool, error) {
		select {
		case <-exited:
			return 0, false, errors.New("rabbitmq-server exited")
		default:
		}
		return treeBytes(n.dir), answers(n.addr) == nil, nil
	})
	if err != nil {
		out, _ := os.ReadFile(filepath.Join(n.dir, "server.out"))
		n.t.Fatalf("%v: %s", err, lastLine(string(out)))
	}
}

// Stop stops the node the way an operator would (rabbitmqctl stop), and waits for it.
func (n *RabbitMQNode) Stop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return
	}
	_ = exec.Command("rabbitmqctl", "-n", n.name, "stop").Run()
	_ = Wait("rabbitmq node "+n.name+" to stop", 30*time.Second, func() (int64, bool, error) {
		return 0, answers(n.addr) != nil, nil
	})
	n.cmd = nil
}

// Crash kills the node's Erlang VM (SIGKILL), as a machine losing power would: no connection
// is closed and nothing is flushed but what RabbitMQ had made durable.
func (n *RabbitMQNode) Crash() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	raw, err := os.ReadFile(filepath.Join(n.dir, "pid"))
	if err != nil {
		n.t.Fatalf("rabbitmq node %s: no pid file: %v", n.name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		n.t.Fatalf("rabbitmq node %s: pid file %q: %v", n.name, raw, err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		n.t.Fatalf("kill rabbitmq node %s: %v", n.name, err)
	}
	_ = Wait("rabbitmq node "+n.name+" to die", 30*time.Second, func() (int64, bool, error) {
		return 0, answers(n.addr) != nil, nil
	})
	n.cmd = nil
}

// treeBytes is the bytes of the files under path (or of the file path), for a wait's progress.
func treeBytes(path string) int64 {
	var n int64
	_ = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// RabbitMQQueue is a consumer's side of a rabbitmq sink on url: durable topic exchange
// "mailhook" (declared as the sink would), durable queue "events" bound to it with routing key
// "events". It returns a channel on it (for Get), closed with the test.
func RabbitMQQueue(t testing.TB, url string) *amqp.Channel {
	t.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.ExchangeDeclare("mailhook", amqp.ExchangeTopic, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare("events", true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueueBind("events", "events", "mailhook", false, nil); err != nil {
		t.Fatal(err)
	}
	return ch
}
