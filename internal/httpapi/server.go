// Package httpapi is tine's HTTP face (tine serve): JSON over HTTP with
// the seeds' resource names (ARCHITECTURE.md: Faces), each endpoint one
// call of internal/service, and server-sent events of runs' status and
// new messages (events.go). It is safe by default: every request needs
// the bearer token; on loopback the Host header must name this server (no
// DNS rebinding); no origin may read an answer unless allowed (CORS);
// bodies are bounded; errors are {"error": {"code", "message"}} with the
// status their code says.
package httpapi

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"tine/internal/service"
	"tine/model"
)

// Options say how the server answers.
type Options struct {
	// Token is the bearer token every request must carry.
	Token string
	// Hosts are the Host headers a request may carry ("host:port",
	// lower case); none: any (the listener is not on loopback, and no
	// name was given).
	Hosts []string
	// Origins are the origins whose pages may read the answers (CORS);
	// none: no other origin.
	Origins []string
	// MaxBody bounds a request's body (default 1 MiB).
	MaxBody int64
	// MaxWait bounds wait_seconds (default 10 minutes).
	MaxWait time.Duration
}

// DefaultMaxBody is the largest request body taken unless asked.
const DefaultMaxBody = 1 << 20

// DefaultMaxWait is the longest wait_seconds taken unless asked.
const DefaultMaxWait = 10 * time.Minute

// Server is the HTTP face over a service.
type Server struct {
	svc  *service.Service
	opts Options
	hub  *Hub
	mux  *http.ServeMux
	// token is the token's hash, compared in constant time.
	token [32]byte
}

// New makes the server for svc; hub publishes its events.
func New(svc *service.Service, hub *Hub, opts Options) *Server {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = DefaultMaxWait
	}
	s := &Server{svc: svc, opts: opts, hub: hub, mux: http.NewServeMux(), token: sha256.Sum256([]byte(opts.Token))}
	s.routes()
	return s
}

// ServeHTTP checks the Host, the origin and the token, then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(s.opts.Hosts) > 0 && !slices.Contains(s.opts.Hosts, strings.ToLower(r.Host)) {
		writeError(w, http.StatusForbidden, "forbidden_host", fmt.Sprintf("the Host header %q does not name this server", model.OneLine(r.Host, 100)))
		return
	}
	origin := r.Header.Get("Origin")
	allowed := origin != "" && slices.Contains(s.opts.Origins, origin)
	if allowed {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Vary", "Origin")
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		if !allowed {
			writeError(w, http.StatusForbidden, "forbidden_origin", "no page of this origin may call tine (tine serve --cors ORIGIN allows one)")
			return
		}
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tine"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a request needs the header Authorization: Bearer TOKEN (tine serve made the token; it is in the file it named)")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	s.mux.ServeHTTP(w, r)
}

// authorized says r carries the token, compared in constant time.
func (s *Server) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.token[:]) == 1
}

// apiError is the body of every error.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, model.OneLine(msg, 0)
	writeJSON(w, status, e)
}

// statusOf is the status an error of the service's is answered with.
func statusOf(c service.Code) int {
	switch c {
	case service.Invalid:
		return http.StatusBadRequest
	case service.NotFound:
		return http.StatusNotFound
	case service.Conflict:
		return http.StatusConflict
	case service.Refused:
		return http.StatusUnprocessableEntity
	case service.Busy:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// fail answers err, with the status its code says.
func fail(w http.ResponseWriter, err error) {
	c := service.CodeOf(err)
	if c == service.Busy {
		w.Header().Set("Retry-After", "5")
	}
	writeError(w, statusOf(c), string(c), err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"the answer could not be written as JSON"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// decode reads r's JSON body into v: unknown fields, trailing data and a
// body over the bound are refused (400, 413); an empty body is {}.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over the %d bytes a request may carry", tooBig.Limit))
		return false
	case err != nil:
		writeError(w, http.StatusBadRequest, "invalid", "the body could not be read: "+err.Error())
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid", "the body is not the JSON this endpoint takes: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid", "the body holds more than one JSON value")
		return false
	}
	return true
}

// LoopbackHosts are the Host headers a server listening on addr (a
// loopback address) is reached by: its address, and localhost, with its
// port.
func LoopbackHosts(addr net.Addr) []string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := fmt.Sprint(tcp.Port)
	hosts := []string{net.JoinHostPort(tcp.IP.String(), port), net.JoinHostPort("localhost", port)}
	if tcp.IP.To4() != nil {
		hosts = append(hosts, net.JoinHostPort("127.0.0.1", port))
	} else {
		hosts = append(hosts, net.JoinHostPort("::1", port))
	}
	return hosts
}

// OpenAPI is the API's description, OpenAPI 3.1: what GET
// /api/openapi.json answers, checked in the tests against the answers
// themselves.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(OpenAPI)
}
