package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/crypto/ssh"

	"tine/harness"

	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Endpoint is the daemon a place talks to, as the environment and the
// docker CLI's contexts say: DOCKER_HOST (with DOCKER_TLS_VERIFY and
// DOCKER_CERT_PATH), else a context (--on docker:NAME, DOCKER_CONTEXT,
// or the current one in ~/.docker/config.json), else this machine's
// socket.
type Endpoint struct {
	// Host is the daemon's address: unix://, tcp:// or ssh://.
	Host string
	// Context is the docker context it came from ("" for none).
	Context string
	// TLS: the client authenticates with the certificates in CertDir
	// (ca.pem, cert.pem, key.pem) and checks the daemon's (Verify).
	CertDir string
	Verify  bool
}

// Key names the endpoint in tine's files (the slots that bound how many
// containers run at once on it).
func (e Endpoint) Key() string {
	sum := sha256.Sum256([]byte(e.Host))
	return hex.EncodeToString(sum[:8])
}

// String says which daemon it is, for messages.
func (e Endpoint) String() string {
	if e.Context != "" {
		return fmt.Sprintf("%s (docker context %s)", e.Host, e.Context)
	}
	return e.Host
}

// Local reports whether the daemon runs on this machine (its socket, or
// loopback TCP): only then can a container reach tine's recording
// gateway on this machine's loopback.
func (e Endpoint) Local() bool {
	u, err := url.Parse(e.Host)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "unix":
		return true
	case "tcp":
		h := u.Hostname()
		return h == "127.0.0.1" || h == "localhost" || h == "::1"
	}
	return false
}

const defaultHost = "unix:///var/run/docker.sock"

// Resolve finds the endpoint for context name ("" for whatever the
// environment says) in environ.
func Resolve(name string, environ []string) (Endpoint, error) {
	get := func(k string) string { return lookup(environ, k) }
	if name == "" {
		if h := get("DOCKER_HOST"); h != "" {
			e := Endpoint{Host: h, CertDir: get("DOCKER_CERT_PATH"), Verify: get("DOCKER_TLS_VERIFY") != ""}
			if e.CertDir == "" && e.Verify {
				e.CertDir = filepath.Join(configDir(get), "")
			}
			return e, nil
		}
		name = get("DOCKER_CONTEXT")
		if name == "" {
			name = currentContext(get)
		}
	}
	if name == "" || name == "default" {
		return Endpoint{Host: defaultHost}, nil
	}
	return readContext(get, name)
}

func lookup(environ []string, key string) string { return harness.Getenv(environ, key) }

// configDir is the docker CLI's configuration folder.
func configDir(get func(string) string) string {
	if d := get("DOCKER_CONFIG"); d != "" {
		return d
	}
	home := get("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".docker")
}

func currentContext(get func(string) string) string {
	b, err := os.ReadFile(filepath.Join(configDir(get), "config.json"))
	if err != nil {
		return ""
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	_ = json.Unmarshal(b, &cfg)
	return cfg.CurrentContext
}

// readContext reads context name as the docker CLI keeps it:
// contexts/meta/<sha256 of the name>/meta.json, and its TLS material in
// contexts/tls/<same>/docker/.
func readContext(get func(string) string, name string) (Endpoint, error) {
	sum := sha256.Sum256([]byte(name))
	id := hex.EncodeToString(sum[:])
	dir := configDir(get)
	b, err := os.ReadFile(filepath.Join(dir, "contexts", "meta", id, "meta.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Endpoint{}, fmt.Errorf("there is no docker context %q (in %s): `docker context ls` lists them", name, filepath.Join(dir, "contexts"))
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	var meta struct {
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: its meta.json: %w", name, err)
	}
	ep, ok := meta.Endpoints["docker"]
	if !ok || ep.Host == "" {
		return Endpoint{}, fmt.Errorf("docker context %q names no docker endpoint", name)
	}
	e := Endpoint{Host: ep.Host, Context: name, Verify: !ep.SkipTLSVerify}
	tls := filepath.Join(dir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err == nil {
		e.CertDir = tls
	} else {
		e.Verify = false
	}
	return e, nil
}

// connect makes a client of e's daemon and checks that it answers,
// negotiating the API version down to the daemon's (1.41 for Debian's
// docker.io 20.10). Its errors say in one sentence what is wrong.
func connect(ctx context.Context, e Endpoint, environ []string) (*client.Client, error) {
	u, err := url.Parse(e.Host)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("%q is not a Docker daemon's address (unix:///path, tcp://host:port or ssh://user@host)", e.Host)
	}
	var opts []client.Opt // the API version is negotiated by default
	// The client says only "Cannot connect" when it cannot: a dial of our
	// own first says why (no socket, refused, permission, no ssh host).
	probe := func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		switch u.Scheme {
		case "unix":
			return d.DialContext(ctx, "unix", u.Path)
		default:
			return d.DialContext(ctx, "tcp", u.Host)
		}
	}
	switch u.Scheme {
	case "ssh":
		dial, err := sshDialer(u, environ)
		if err != nil {
			return nil, err
		}
		probe = dial
		opts = append(opts, client.WithHost("http://docker.example.com"), client.WithDialContext(dial))
	case "unix", "tcp", "http", "https":
		opts = append(opts, client.WithHost(e.Host))
		if e.CertDir != "" && u.Scheme != "unix" {
			opts = append(opts, client.WithTLSClientConfig(filepath.Join(e.CertDir, "ca.pem"),
				filepath.Join(e.CertDir, "cert.pem"), filepath.Join(e.CertDir, "key.pem")))
		}
	default:
		return nil, fmt.Errorf("%q is not a Docker daemon's address (unix:///path, tcp://host:port or ssh://user@host)", e.Host)
	}
	c, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("the Docker daemon at %s: %w", e, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	conn, err := probe(pctx, "", "")
	if err != nil {
		c.Close()
		if u.Scheme == "ssh" {
			return nil, err // the dialer says it whole
		}
		return nil, unreachable(e, err)
	}
	conn.Close()
	if _, err := c.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		c.Close()
		return nil, unreachable(e, err)
	}
	return c, nil
}

// unreachable says why the daemon at e did not answer.
func unreachable(e Endpoint, err error) error {
	switch {
	case errors.Is(err, syscall.EACCES) || errors.Is(err, fs.ErrPermission) || strings.Contains(err.Error(), "permission denied"):
		return fmt.Errorf("permission denied on the Docker daemon at %s: this user may not use it (add it to the docker group, or point DOCKER_HOST at a daemon it may use)", e)
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no such file"):
		return fmt.Errorf("no Docker daemon answers at %s (is it running? DOCKER_HOST, DOCKER_CONTEXT or --on docker:CONTEXT choose another)", e)
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"):
		return fmt.Errorf("the Docker daemon at %s did not answer within 15 s", e)
	}
	return fmt.Errorf("the Docker daemon at %s: %w", e, err)
}

// sshDialer reaches the daemon's socket on the host of u over SSH (what
// the docker CLI does through `docker system dial-stdio`), with the
// person's ssh agent or unencrypted keys in ~/.ssh, checking the host's
// key against ~/.ssh/known_hosts. The socket is u's path, else
// /var/run/docker.sock.
func sshDialer(u *url.URL, environ []string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	get := func(k string) string { return lookup(environ, k) }
	home := get("HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	user := u.User.Username()
	if user == "" {
		user = get("USER")
	}
	if user == "" {
		user = "root"
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "22")
	}
	socket := u.Path
	if socket == "" || socket == "/" {
		socket = "/var/run/docker.sock"
	}
	var auths []ssh.AuthMethod
	if sock := get("SSH_AUTH_SOCK"); sock != "" {
		if conn, err := net.Dial("unix", sock); err == nil {
			auths = append(auths, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
		}
	}
	var signers []ssh.Signer
	for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		b, err := os.ReadFile(filepath.Join(home, ".ssh", name))
		if err != nil {
			continue
		}
		if s, err := ssh.ParsePrivateKey(b); err == nil {
			signers = append(signers, s)
		}
	}
	if len(signers) > 0 {
		auths = append(auths, ssh.PublicKeys(signers...))
	}
	if len(auths) == 0 {
		return nil, fmt.Errorf("no way to log in to %s over ssh: no ssh agent (SSH_AUTH_SOCK) and no unencrypted key in %s", u.Host, filepath.Join(home, ".ssh"))
	}
	known := filepath.Join(home, ".ssh", "known_hosts")
	check, err := knownhosts.New(known)
	if err != nil {
		return nil, fmt.Errorf("ssh to %s: the host's key cannot be checked (%s: %v); connect once with ssh to record it", u.Host, known, err)
	}
	cfg := &ssh.ClientConfig{User: user, Auth: auths, HostKeyCallback: check, Timeout: 10 * time.Second}
	// One ssh connection, each stream to the socket a channel of it: the
	// client dials for every request it cannot reuse a connection for
	// (each container's attached streams), and a handshake each is slow.
	var mu sync.Mutex
	var shared *ssh.Client
	connect := func(ctx context.Context) (*ssh.Client, error) {
		d := net.Dialer{Timeout: 10 * time.Second}
		raw, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, fmt.Errorf("the ssh host %s does not answer: %w", u.Host, err)
		}
		conn, chans, reqs, err := ssh.NewClientConn(raw, host, cfg)
		if err != nil {
			raw.Close()
			var keyErr *knownhosts.KeyError
			if errors.As(err, &keyErr) {
				return nil, fmt.Errorf("ssh to %s: its host key is not the one in %s (or none is): connect once with ssh to check and record it", u.Host, known)
			}
			return nil, fmt.Errorf("ssh to %s: %w", u.Host, err)
		}
		return ssh.NewClient(conn, chans, reqs), nil
	}
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		for attempt := 0; attempt < 2; attempt++ {
			if shared == nil {
				c, err := connect(ctx)
				if err != nil {
					return nil, err
				}
				shared = c
			}
			sc, err := shared.Dial("unix", socket)
			if err == nil {
				return sc, nil
			}
			// A connection that broke is made again, once.
			shared.Close()
			shared = nil
			if attempt == 1 {
				return nil, fmt.Errorf("ssh to %s: reaching %s there: %w", u.Host, socket, err)
			}
		}
		return nil, errors.New("unreachable")
	}, nil
}
