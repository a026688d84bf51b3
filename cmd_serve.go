package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"tine/harness/fork"
	"tine/internal/httpapi"
	"tine/internal/service"
	"tine/model"
)

// DefaultListen is where tine serve listens unless told: this machine
// only.
const defaultListen = "127.0.0.1:7433"

// cmdServe serves tine's operations as JSON over HTTP (internal/httpapi).
func cmdServe(ctx context.Context, e *env, args []string) error {
	f := newFlags(e, "serve", "[--listen ADDR] [--public [--tls-cert FILE --tls-key FILE]] [--cors ORIGIN]... [--allow-host HOST]... [--parallel N] [--queue N]",
		"Serve tine as JSON over HTTP: the runs, their checkpoints, forks (and replays at a step),\n"+
			"continue, retry, cancel, apply, compare, search, merge, import and gc, with GET /api/events\n"+
			"streaming runs' status and new messages as server-sent events, and GET /api/openapi.json\n"+
			"describing it all. It listens on 127.0.0.1 only unless told (--listen with another address\n"+
			"needs --public). Every request carries the bearer token made on its first start and kept\n"+
			"beside the database (mode 0600); the first start shows it, with a curl line to try.\n"+
			"Turns run in this process, --parallel at once; a fork that would pass --queue turns waiting\n"+
			"or running is refused (429). Ctrl+C stops it: turns still running are recorded cancelled.")
	listen := f.String("listen", defaultListen, "the `address` to listen on (host:port; port 0 picks a free one)")
	public := f.Bool("public", false, "allow --listen on an address other machines reach (the token is then all that guards tine; give --tls-cert)")
	certFile := f.String("tls-cert", "", "serve HTTPS with this certificate (`file`, PEM), and --tls-key")
	keyFile := f.String("tls-key", "", "the certificate's private key (`file`, PEM)")
	f.path("tls-cert")
	f.path("tls-key")
	var origins, hosts stringList
	f.Var(&origins, "cors", "an `origin` (https://example.com) whose pages may call tine (repeat for more; default none)")
	f.Var(&hosts, "allow-host", "a `host` name the Host header may carry besides this server's address (repeat for more)")
	parallel := f.Int("parallel", fork.DefaultParallel, "how many turns run at once")
	queue := f.Int("queue", 64, "how many turns may wait or run at once; a request for more is refused (429)")
	maxBody := f.Int64("max-body", httpapi.DefaultMaxBody, "the largest request body taken, in `bytes` (413 above)")
	if _, err := f.parse(args, 0, 0); err != nil {
		return err
	}
	switch {
	case (*certFile == "") != (*keyFile == ""):
		return usagef("serve: --tls-cert and --tls-key go together")
	case *parallel < 1 || *queue < 1 || *maxBody < 1:
		return usagef("serve: --parallel, --queue and --max-body are 1 or more")
	}
	loopback, err := isLoopback(*listen)
	if err != nil {
		return usagef("serve: --listen: %s", err)
	}
	if !loopback && !*public {
		return usagef("serve: %s is reached from other machines; tine listens there only with --public (and the token guards it: give --tls-cert too)", *listen)
	}
	st, err := e.open()
	if err != nil {
		return err
	}
	defer st.Close()
	// A request's garbage is short-lived (rows, transcripts, JSON) and the
	// live heap small (8 MB under serveload): collecting at twice it ran
	// the collector 27 times a second, 14% of the CPU; at five times it
	// costs some 30 MB more.
	debug.SetGCPercent(400)
	token, made, tokenPath, err := serveToken(st.Path())
	if err != nil {
		return err
	}
	svc, err := faceService(st)
	if err != nil {
		return err
	}
	q := service.NewQueue(svc.Driver, svc.Replayer, *parallel, *queue)
	svc.Turns = q
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	allowed := []string{}
	for _, h := range hosts {
		allowed = append(allowed, strings.ToLower(h))
	}
	if loopback {
		allowed = append(allowed, httpapi.LoopbackHosts(ln.Addr())...)
	}
	hub := httpapi.NewHub(st, 200*time.Millisecond)
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	go hub.Run(hubCtx)
	srv := &http.Server{
		Handler:           httpapi.New(svc, hub, httpapi.Options{Token: token, Hosts: allowed, Origins: origins, MaxBody: *maxBody}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	scheme := "http"
	if *certFile != "" {
		scheme = "https"
	}
	url := scheme + "://" + ln.Addr().String()
	if !loopback {
		fmt.Fprintf(e.stderr, "tine serve: warning: listening on %s, which other machines reach: the token is all that guards tine there\n", ln.Addr())
		if scheme == "http" {
			fmt.Fprintln(e.stderr, "tine serve: warning: without --tls-cert the token and every answer cross the network in clear text")
		}
	}
	fmt.Fprintf(e.stdout, "tine serve: listening on %s (database %s)\n", url, model.SafeText(st.Path()))
	bearer := "$(cat " + shellQuote(tokenPath) + ")"
	if made {
		fmt.Fprintf(e.stdout, "token: %s\n(shown this once; it is kept in %s, mode 0600)\n", token, model.SafeText(tokenPath))
		bearer = token
	} else {
		fmt.Fprintf(e.stdout, "token: in %s\n", model.SafeText(tokenPath))
	}
	fmt.Fprintf(e.stdout, "try: curl -H \"Authorization: Bearer %s\" %s/api/runs\n", bearer, url)
	served := make(chan error, 1)
	go func() {
		if *certFile != "" {
			served <- srv.ServeTLS(ln, *certFile, *keyFile)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	select {
	case err = <-served:
	case <-ctx.Done():
	}
	// Stopping: no new request, the answers being written finish, then
	// the turns still running are cancelled and recorded so.
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shut)
	stopHub()
	q.Close(15 * time.Second)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// isLoopback says addr (host:port) listens on this machine only.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false, fmt.Errorf("%q is no IP address (tine listens on an address, not a name, but localhost)", host)
	}
	return ip.IsLoopback(), nil
}

// serveToken is tine serve's bearer token for the database at db: read
// from the file beside it, or made (32 random bytes) and kept there, mode
// 0600, on first start (made). A file others may read is refused.
func serveToken(db string) (token string, made bool, path string, err error) {
	path = db + "-token"
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return "", false, path, err
		}
		token = hex.EncodeToString(raw)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", false, path, fmt.Errorf("serve: keeping the token: %w", err)
		}
		_, werr := f.WriteString(token + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return "", false, path, fmt.Errorf("serve: keeping the token: %w", werr)
		}
		return token, true, path, nil
	}
	if err != nil {
		return "", false, path, fmt.Errorf("serve: reading the token: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", false, path, err
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", false, path, fmt.Errorf("serve: %s may be read by others (mode %04o): chmod 600 it, or remove it to make a new token", model.SafeText(path), info.Mode().Perm())
	}
	token = strings.TrimSpace(string(b))
	if len(token) < 32 {
		return "", false, path, fmt.Errorf("serve: %s holds no token tine made (under 32 characters): remove it to make a new one", model.SafeText(path))
	}
	return token, false, path, nil
}
