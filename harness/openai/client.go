package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"tine/harness"
	"tine/model"
)

// DefaultBaseURL is where requests go when neither Config.BaseURL nor
// OPENAI_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.openai.com/v1"

// Defaults for the zero fields of a Config.
const (
	DefaultConnectTimeout = 15 * time.Second
	DefaultStallTimeout   = 120 * time.Second
	DefaultMaxRetries     = 3
	DefaultMaxRetryWait   = 60 * time.Second
)

// Config configures a Harness. The zero value talks to api.openai.com with
// the defaults above; ConfigFromEnv fills it from the environment.
type Config struct {
	// BaseURL is the API root holding /chat/completions, e.g.
	// "http://localhost:11434/v1" for Ollama.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is used when a turn names none.
	Model string
	// ConnectTimeout bounds dialling and the TLS handshake. It applies only
	// when HTTPClient is nil.
	ConnectTimeout time.Duration
	// StallTimeout bounds the wait for the response headers and for each
	// chunk of the stream after them. A whole answer may take far longer.
	StallTimeout time.Duration
	// MaxRetries is how many times a failed call is tried again (429, 408,
	// 5xx, a connection that failed before any text arrived). 0 means
	// DefaultMaxRetries; a negative value turns retries off.
	MaxRetries int
	// MaxRetryWait caps one wait between tries, whether it comes from
	// backoff or from the server's retry-after.
	MaxRetryWait time.Duration
	// HTTPClient, when set, sends the requests. Its Timeout, if any, bounds
	// a whole streamed answer, so it is best left zero.
	HTTPClient *http.Client
}

// ConfigFromEnv reads OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.
func ConfigFromEnv() Config {
	return Config{
		BaseURL: os.Getenv("OPENAI_BASE_URL"),
		APIKey:  os.Getenv("OPENAI_API_KEY"),
		Model:   os.Getenv("OPENAI_MODEL"),
	}
}

// Harness continues a run through an OpenAI-compatible Chat Completions
// server (OpenAI, Ollama, llama.cpp, vLLM, OpenRouter). It sends the whole
// prefix on every turn, so it can fork anywhere; it does not run tools: a
// reply with tool calls ends the turn with the calls recorded.
type Harness struct {
	cfg      Config
	endpoint string
	host     string // names the server in errors
	client   *http.Client
	// now and sleep are swapped by tests.
	now   func() time.Time
	sleep func(context.Context, time.Duration) error
}

var _ harness.Harness = (*Harness)(nil)

// New returns a Harness for cfg, filling its zero fields with defaults.
func New(cfg Config) *Harness {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.MaxRetryWait <= 0 {
		cfg.MaxRetryWait = DefaultMaxRetryWait
	}
	client := cfg.HTTPClient
	if client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DialContext = (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
		t.TLSHandshakeTimeout = cfg.ConnectTimeout
		// No client-wide Timeout: it would cut long answers. The stall
		// timeout watches the stream instead.
		client = &http.Client{Transport: t}
	}
	host := cfg.BaseURL
	if u, err := url.Parse(cfg.BaseURL); err == nil && u.Host != "" {
		host = u.Host
	}
	return &Harness{
		cfg:      cfg,
		endpoint: cfg.BaseURL + "/chat/completions",
		host:     host,
		client:   client,
		now:      time.Now,
		sleep:    sleepCtx,
	}
}

// Name implements harness.Harness.
func (*Harness) Name() string { return "openai" }

// Capabilities implements harness.Harness.
func (*Harness) Capabilities() harness.Capabilities { return harness.Known["openai"] }

// Turn implements harness.Harness. It emits the user message (when Input is
// set), a delta for each piece of streamed text, and the finished assistant
// message.
func (h *Harness) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	modelName := req.Model
	if modelName == "" {
		modelName = h.cfg.Model
	}
	if modelName == "" {
		return errors.New("openai: no model: pass --model or set OPENAI_MODEL")
	}
	msgs := slices.Clip(req.Prefix)
	var user *model.Message
	if req.Input != "" {
		user = &model.Message{Role: model.User, Parts: []model.Part{{Kind: model.Text, Text: req.Input}}, Time: h.now()}
		msgs = append(msgs, *user)
	}
	wire := toWire(normalize(msgs))
	if len(wire) == 0 {
		return errors.New("openai: nothing to send: the prefix is empty and there is no new message")
	}
	body, err := json.Marshal(chatRequest{
		Model:         modelName,
		Messages:      wire,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
	})
	if err != nil {
		return fmt.Errorf("openai: encode request: %w", err)
	}
	if user != nil {
		emit(harness.Event{Kind: harness.EventMessage, Message: *user})
	}
	msg, err := h.call(ctx, body, emit)
	if err != nil {
		return err
	}
	if msg.Model == "" {
		msg.Model = modelName
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg})
	return nil
}

// call posts body, retrying what is worth retrying, and returns the
// assembled answer.
func (h *Harness) call(ctx context.Context, body []byte, emit func(harness.Event)) (model.Message, error) {
	for attempt := 0; ; attempt++ {
		msg, err := h.attempt(ctx, body, emit)
		if err == nil {
			return msg, nil
		}
		if ctx.Err() != nil {
			return model.Message{}, cancelled(ctx)
		}
		var re *retryableError
		if !errors.As(err, &re) {
			return model.Message{}, err
		}
		if attempt >= h.cfg.MaxRetries {
			if attempt == 0 {
				return model.Message{}, re.err
			}
			return model.Message{}, fmt.Errorf("%w (gave up after %d attempts)", re.err, attempt+1)
		}
		wait := re.after
		if wait < 0 {
			wait = backoff(attempt)
		}
		wait = min(wait, h.cfg.MaxRetryWait)
		if err := h.sleep(ctx, wait); err != nil {
			return model.Message{}, cancelled(ctx)
		}
	}
}

// attempt makes one request and reads its stream to the end.
func (h *Harness) attempt(ctx context.Context, body []byte, emit func(harness.Event)) (model.Message, error) {
	reqCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	dog := time.AfterFunc(h.cfg.StallTimeout, func() { cancel(errStalled) })
	defer dog.Stop()

	hreq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, h.endpoint, bytes.NewReader(body))
	if err != nil {
		return model.Message{}, fmt.Errorf("openai: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if h.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+h.cfg.APIKey)
	}
	resp, err := h.client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return model.Message{}, cancelled(ctx)
		}
		if context.Cause(reqCtx) == errStalled {
			return model.Message{}, h.stallError()
		}
		// The request never got an answer: safe to send again.
		return model.Message{}, &retryableError{err: fmt.Errorf("openai: cannot reach %s: %w", h.host, err), after: -1}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return model.Message{}, h.statusError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "event-stream") {
		return model.Message{}, fmt.Errorf("openai: %s answered %s, not an event stream", h.host, ct)
	}

	a := &assembler{emit: emit}
	err = readSSE(resp.Body, func() { dog.Reset(h.cfg.StallTimeout) }, func(_, data string) (bool, error) {
		return a.chunk(data)
	})
	switch {
	case err == nil, err == io.EOF && a.finish != "":
		// Some servers close after the finish chunk without [DONE].
		return a.message(h.now()), nil
	case ctx.Err() != nil:
		return model.Message{}, cancelled(ctx)
	case context.Cause(reqCtx) == errStalled:
		return model.Message{}, h.stallError()
	}
	var bad *malformedError
	if errors.As(err, &bad) {
		return model.Message{}, fmt.Errorf("openai: malformed stream from %s: %v", h.host, bad)
	}
	var se *streamError
	if errors.As(err, &se) {
		return model.Message{}, fmt.Errorf("openai: %s reported an error mid-stream: %s", h.host, redact(se.msg, h.cfg.APIKey))
	}
	early := fmt.Errorf("openai: stream ended early from %s (no [DONE] after %d events): %w", h.host, a.events, err)
	if a.emitted {
		// The text so far has reached the screen; trying again would show
		// it twice, so the turn fails and the user can run it again.
		return model.Message{}, early
	}
	return model.Message{}, &retryableError{err: early, after: -1}
}

func (h *Harness) stallError() error {
	return fmt.Errorf("openai: %s sent nothing for %s (stall timeout)", h.host, h.cfg.StallTimeout)
}

// statusError turns a non-200 answer into an error, retryable for 408, 429
// and 5xx.
func (h *Harness) statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg := redact(errorMessage(b), h.cfg.APIKey)
	err := fmt.Errorf("openai: HTTP %d from %s: %s", resp.StatusCode, h.host, msg)
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500 {
		after, ok := retryAfter(resp.Header, h.now())
		if !ok {
			after = -1
		}
		return &retryableError{err: err, after: after}
	}
	return err
}

// --- request shape ---

type chatRequest struct {
	Model         string         `json:"model"`
	Messages      []wireMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is a Chat Completions message as sent. Content is a string, a
// list of parts, or null (an assistant message holding only tool calls).
type wireMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// notRun answers a tool call nothing answered: the API rejects a
// conversation with unanswered calls, and this harness runs no tools.
const notRun = "not run: this tool call was never executed"

// normalize makes msgs valid for a chat API: every tool call gets a result
// (a stand-in error when it had none, e.g. a turn of this harness that
// ended with calls) and results whose call is not in msgs are dropped.
func normalize(msgs []model.Message) []model.Message {
	calls, answered := map[string]bool{}, map[string]bool{}
	for _, m := range msgs {
		for _, p := range m.Parts {
			switch p.Kind {
			case model.ToolCall:
				calls[p.ToolCallID] = true
			case model.ToolResult:
				answered[p.ToolCallID] = true
			}
		}
	}
	out := make([]model.Message, 0, len(msgs))
	for _, m := range msgs {
		if slices.ContainsFunc(m.Parts, func(p model.Part) bool { return p.Kind == model.ToolResult && !calls[p.ToolCallID] }) {
			m.Parts = slices.DeleteFunc(slices.Clone(m.Parts), func(p model.Part) bool { return p.Kind == model.ToolResult && !calls[p.ToolCallID] })
		}
		out = append(out, m)
		if m.Role != model.Assistant {
			continue
		}
		var missing []model.Part
		for _, c := range m.ToolCalls() {
			if !answered[c.ToolCallID] {
				missing = append(missing, model.Part{Kind: model.ToolResult, ToolCallID: c.ToolCallID, ToolName: c.ToolName, Text: notRun, IsError: true})
			}
		}
		if missing != nil {
			out = append(out, model.Message{Role: model.Tool, Parts: missing})
		}
	}
	return out
}

// toWire converts messages to the Chat Completions shape. Thinking is not
// sent; images go as image_url parts; other raw parts are skipped.
func toWire(msgs []model.Message) []wireMessage {
	var out []wireMessage
	for _, m := range msgs {
		var texts []string
		var images []json.RawMessage
		var calls []wireToolCall
		var results []wireMessage
		for _, p := range m.Parts {
			switch p.Kind {
			case model.Text:
				if p.Text != "" {
					texts = append(texts, p.Text)
				}
			case model.Image, model.Other:
				if img := imagePart(p.Raw); img != nil {
					images = append(images, img)
				}
			case model.ToolCall:
				args := p.ToolInput
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				calls = append(calls, wireToolCall{ID: p.ToolCallID, Type: "function", Function: wireFunction{Name: p.ToolName, Arguments: args}})
			case model.ToolResult:
				content := p.Text
				if p.IsError {
					// Chat Completions has no error flag on tool results.
					content = "Error: " + content
				}
				results = append(results, wireMessage{Role: "tool", ToolCallID: p.ToolCallID, Content: content})
			}
		}
		// Results first: a user message carrying results (Claude Code's
		// shape) must answer the calls before saying anything new.
		out = append(out, results...)
		switch m.Role {
		case model.System:
			if len(texts) > 0 {
				out = append(out, wireMessage{Role: "system", Content: strings.Join(texts, "\n\n")})
			}
		case model.User:
			switch {
			case len(images) > 0:
				var parts []any
				for _, t := range texts {
					parts = append(parts, map[string]string{"type": "text", "text": t})
				}
				for _, img := range images {
					parts = append(parts, img)
				}
				out = append(out, wireMessage{Role: "user", Content: parts})
			case len(texts) > 0:
				out = append(out, wireMessage{Role: "user", Content: strings.Join(texts, "\n\n")})
			}
		case model.Assistant:
			if len(texts) == 0 && len(calls) == 0 {
				continue
			}
			w := wireMessage{Role: "assistant", ToolCalls: calls}
			if len(texts) > 0 {
				w.Content = strings.Join(texts, "\n\n")
			}
			out = append(out, w)
		}
	}
	return out
}

// imagePart returns raw as an OpenAI image_url part: as is when it is one,
// converted when it is an Anthropic image block, nil otherwise.
func imagePart(raw string) json.RawMessage {
	if raw == "" {
		return nil
	}
	var p struct {
		Type   string `json:"type"`
		Source struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
			Data      string `json:"data"`
			URL       string `json:"url"`
		} `json:"source"`
	}
	if json.Unmarshal([]byte(raw), &p) != nil {
		return nil
	}
	var u string
	switch {
	case p.Type == "image_url":
		return json.RawMessage(raw)
	case p.Type == "image" && p.Source.Type == "base64" && p.Source.Data != "":
		u = "data:" + p.Source.MediaType + ";base64," + p.Source.Data
	case p.Type == "image" && p.Source.Type == "url" && p.Source.URL != "":
		u = p.Source.URL
	default:
		return nil
	}
	b, _ := json.Marshal(map[string]any{"type": "image_url", "image_url": map[string]string{"url": u}})
	return b
}

// --- the stream ---

// streamChunk is one chat.completion.chunk.
type streamChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
			ToolCalls        []struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	// Error is how OpenRouter and vLLM report a failure mid-stream.
	Error json.RawMessage `json:"error"`
}

type callBuilder struct {
	id, name string
	args     strings.Builder
}

// assembler builds the assistant message from the chunks of one stream.
type assembler struct {
	emit            func(harness.Event)
	id, model       string
	text, reasoning strings.Builder
	calls           []*callBuilder // in order of arrival
	byIndex         map[int]*callBuilder
	usage           model.Usage
	finish          string
	events          int
	emitted         bool
}

func (a *assembler) chunk(data string) (bool, error) {
	a.events++
	if data == "[DONE]" {
		return true, nil
	}
	var c streamChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return false, &malformedError{err: err, data: data}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, &streamError{msg: errorMessage([]byte(`{"error":` + string(c.Error) + `}`))}
	}
	if c.ID != "" {
		a.id = c.ID
	}
	if c.Model != "" {
		a.model = c.Model
	}
	if u := c.Usage; u != nil {
		cached := u.PromptTokensDetails.CachedTokens
		// prompt_tokens counts cached tokens too; model.Usage counts each once.
		a.usage = model.Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadTokens: cached}
	}
	for _, ch := range c.Choices {
		d := ch.Delta
		a.reasoning.WriteString(d.ReasoningContent)
		a.reasoning.WriteString(d.Reasoning)
		if d.Content != "" {
			a.text.WriteString(d.Content)
			a.emitted = true
			a.emit(harness.Event{Kind: harness.EventDelta, Delta: d.Content})
		}
		for _, tc := range d.ToolCalls {
			c := a.call(tc.Index, tc.ID)
			c.name += tc.Function.Name
			c.args.WriteString(tc.Function.Arguments)
		}
		if ch.FinishReason != "" {
			a.finish = ch.FinishReason
		}
	}
	return false, nil
}

// call finds the builder a tool-call delta belongs to: by index, or, for
// servers that send each call whole without one, by id.
func (a *assembler) call(index *int, id string) *callBuilder {
	if index == nil || *index < 0 {
		if n := len(a.calls); n > 0 && (id == "" || a.calls[n-1].id == id) {
			return a.calls[n-1]
		}
		c := &callBuilder{id: id}
		a.calls = append(a.calls, c)
		return c
	}
	c, ok := a.byIndex[*index]
	if !ok {
		c = &callBuilder{}
		if a.byIndex == nil {
			a.byIndex = map[int]*callBuilder{}
		}
		a.byIndex[*index] = c
		a.calls = append(a.calls, c)
	}
	if c.id == "" {
		c.id = id
	}
	return c
}

func (a *assembler) message(now time.Time) model.Message {
	m := model.Message{Role: model.Assistant, Model: a.model, Usage: a.usage, Time: now, NativeID: a.id}
	if s := a.reasoning.String(); s != "" {
		m.Parts = append(m.Parts, model.Part{Kind: model.Thinking, Text: s})
	}
	if s := a.text.String(); s != "" {
		m.Parts = append(m.Parts, model.Part{Kind: model.Text, Text: s})
	}
	for i, c := range a.calls {
		id := c.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: id, ToolName: c.name, ToolInput: c.args.String()})
	}
	return m
}

// --- cost ---

// price is USD per million tokens.
type price struct{ in, cachedIn, out float64 }

// prices are OpenAI's published list prices (standard tier) for models
// whose price is known here; anything else has no estimate.
var prices = map[string]price{
	"gpt-4o":       {2.50, 1.25, 10},
	"gpt-4o-mini":  {0.15, 0.075, 0.60},
	"gpt-4.1":      {2, 0.50, 8},
	"gpt-4.1-mini": {0.40, 0.10, 1.60},
	"gpt-4.1-nano": {0.10, 0.025, 0.40},
	"o3":           {2, 0.50, 8},
	"o4-mini":      {1.10, 0.275, 4.40},
	"gpt-5":        {1.25, 0.125, 10},
	"gpt-5-mini":   {0.25, 0.025, 2},
	"gpt-5-nano":   {0.05, 0.005, 0.40},
}

// Cost estimates what u cost on OpenAI's API at list price. known is false
// for models not in the table (local models, other providers, new models):
// an unknown price is not guessed.
func (h *Harness) Cost(modelName string, u model.Usage) (usd float64, known bool) {
	p, ok := prices[baseModel(modelName)]
	if !ok {
		return 0, false
	}
	return (float64(u.InputTokens+u.CacheWriteTokens)*p.in + float64(u.CacheReadTokens)*p.cachedIn + float64(u.OutputTokens)*p.out) / 1e6, true
}

// snapshot matches a dated snapshot suffix: "-2024-08-06" or "-20250929".
var snapshot = regexp.MustCompile(`-(\d{4}-\d{2}-\d{2}|\d{8})$`)

// baseModel strips a snapshot suffix ("gpt-4o-2024-08-06" -> "gpt-4o");
// any other suffix names another model and is kept.
func baseModel(name string) string { return snapshot.ReplaceAllString(name, "") }

// --- plumbing (the anthropic package keeps a twin of this) ---

var errStalled = errors.New("stall timeout")

// retryableError is a failure worth another try; after is the wait the
// server asked for, or negative for "use backoff".
type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

type malformedError struct {
	err  error
	data string
}

func (e *malformedError) Error() string {
	return fmt.Sprintf("bad JSON in data line %q: %v", clip(e.data, 60), e.err)
}

type streamError struct{ msg string }

func (e *streamError) Error() string { return e.msg }

func cancelled(ctx context.Context) error {
	return fmt.Errorf("openai: turn cancelled: %w", ctx.Err())
}

// readSSE reads server-sent events from r, calling fn with each event's
// name and data until fn says it is done. tick is called on every line so
// a watchdog can tell a slow stream from a stalled one. It returns nil when
// fn is done, fn's error, or the read error (io.EOF when the stream just
// ended).
func readSSE(r io.Reader, tick func(), fn func(event, data string) (bool, error)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			tick()
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data != nil {
					done, ferr := fn(event, strings.Join(data, "\n"))
					if ferr != nil || done {
						return ferr
					}
				}
				event, data = "", nil
			case strings.HasPrefix(line, ":"):
				// A comment: keep-alives, OpenRouter's "PROCESSING".
			default:
				field, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch field {
				case "event":
					event = value
				case "data":
					data = append(data, value)
				}
			}
		}
		if err != nil {
			return err
		}
	}
}

// errorMessage pulls one line out of an API error body: OpenAI's and
// Anthropic's {"error": {"message", "type"}}, Ollama's {"error": "..."}, or
// the body itself.
func errorMessage(b []byte) string {
	var e struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		var inner struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		}
		var s string
		switch {
		case json.Unmarshal(e.Error, &inner) == nil && inner.Message != "":
			if inner.Type != "" && !strings.Contains(inner.Message, inner.Type) {
				return harness.OneLine(inner.Message+" ("+inner.Type+")", 300)
			}
			return harness.OneLine(inner.Message, 300)
		case json.Unmarshal(e.Error, &s) == nil && s != "":
			return harness.OneLine(s, 300)
		case e.Message != "":
			return harness.OneLine(e.Message, 300)
		}
	}
	if s := harness.OneLine(string(b), 300); s != "" {
		return s
	}
	return "(empty body)"
}

// redact keeps the key out of anything a server echoed back.
func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// retryAfter reads how long the server asked to wait: retry-after-ms
// (OpenAI, Anthropic), else Retry-After in seconds or as an HTTP date.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before try n+2 when the server named none: 0.5 s
// doubling, with up to 25% jitter so many forks do not retry in step.
func backoff(n int) time.Duration {
	d := 500 * time.Millisecond << min(n, 10)
	return d + rand.N(d/4+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
