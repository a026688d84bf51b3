// Command modelserver runs the scripted model server for scripts.
//
//	go run ./internal/modelserver/cmd/modelserver -script replies.json \
//	    -url-file /tmp/url -requests /tmp/requests.jsonl
//
// It prints "modelserver: listening on http://127.0.0.1:PORT" on stderr (and the
// bare URL to -url-file), serves until SIGINT/SIGTERM, then writes every
// recorded request as one JSON line to -requests. With -control (default on),
// /_control/replies, /_control/reset, /_control/requests and /_control/pending
// let a script push replies and read requests over HTTP.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"

	"tine/internal/modelserver"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (loopback only)")
	script := flag.String("script", "", "JSON script file: {\"model\",\"default\",\"replies\":[...]} or [replies]")
	model := flag.String("model", "", "model id reported by /v1/models (default "+modelserver.DefaultModel+")")
	urlFile := flag.String("url-file", "", "write the base URL to this file once listening")
	reqFile := flag.String("requests", "", "on exit, write every recorded request here as JSON lines")
	control := flag.Bool("control", true, "enable /_control/ endpoints")
	quiet := flag.Bool("q", false, "do not log each request")
	flag.Parse()

	opts := modelserver.Options{Addr: *addr, Model: *model, Control: *control}
	var replies []modelserver.Reply
	if *script != "" {
		sc, err := modelserver.LoadScript(*script)
		if err != nil {
			log.Fatal(err)
		}
		if opts.Model == "" {
			opts.Model = sc.Model
		}
		opts.Default = sc.Default
		replies = sc.Replies
	}
	s := start(opts, *quiet)
	s.Push(replies...)
	run(s, *urlFile, *reqFile)
}

func start(opts modelserver.Options, quiet bool) *modelserver.Server {
	if !quiet {
		opts.Logf = log.Printf
	}
	s, err := modelserver.Start(opts)
	if err != nil {
		log.Fatal(err)
	}
	return s
}

func run(s *modelserver.Server, urlFile, reqFile string) {
	fmt.Fprintf(os.Stderr, "modelserver: listening on %s\n", s.URL())
	if urlFile != "" {
		if err := os.WriteFile(urlFile, []byte(s.URL()+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = s.Close()
	if reqFile != "" {
		f, err := os.Create(reqFile)
		if err != nil {
			log.Fatal(err)
		}
		enc := json.NewEncoder(f)
		for _, r := range s.Requests() {
			_ = enc.Encode(r)
		}
		_ = f.Close()
	}
}
