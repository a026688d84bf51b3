// Package anthropic is the harness for the Anthropic Messages API: it sends
// a run's prefix as a Messages request, streams the answer, and records it.
// Like the openai harness it can fork at any boundary and runs no tools.
package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"tine/harness"
	"tine/internal/apihttp"
	"tine/model"
)

// DefaultBaseURL is where requests go when neither Config.BaseURL nor
// ANTHROPIC_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.anthropic.com"

// APIVersion is sent as the anthropic-version header.
const APIVersion = "2023-06-01"

// Defaults for the zero fields of a Config.
const (
	DefaultMaxTokens      = 4096
	DefaultConnectTimeout = apihttp.DefaultConnectTimeout
	DefaultStallTimeout   = apihttp.DefaultStallTimeout
	DefaultMaxRetries     = apihttp.DefaultMaxRetries
	DefaultMaxRetryWait   = apihttp.DefaultMaxRetryWait
	DefaultMaxEventBytes  = apihttp.DefaultMaxEventBytes
)

// Config configures a Harness; ConfigFromEnv fills it from the environment.
type Config struct {
	// BaseURL is the API root, with or without "/v1" (Claude Code's
	// ANTHROPIC_BASE_URL convention is without).
	BaseURL string
	// APIKey is sent as x-api-key; empty sends none (a local proxy).
	APIKey string
	// Model is used when a turn names none.
	Model string
	// MaxTokens caps the answer; the API requires a value.
	MaxTokens int
	// ConnectTimeout bounds dialling and the TLS handshake. It applies only
	// when HTTPClient is nil.
	ConnectTimeout time.Duration
	// StallTimeout bounds the wait for the response headers and for each
	// event of the stream after them (the API pings while it thinks).
	StallTimeout time.Duration
	// MaxRetries is how many times a failed call is tried again (429, 529,
	// 408, 5xx, overloaded_error, a connection that failed before any text
	// arrived). 0 means DefaultMaxRetries; a negative value turns retries off.
	MaxRetries int
	// MaxRetryWait caps one wait between tries, from backoff or retry-after
	// (TINE_MAX_RETRY_WAIT).
	MaxRetryWait time.Duration
	// MaxEventBytes bounds one event of the stream; a bigger one fails the
	// turn. 0 means DefaultMaxEventBytes.
	MaxEventBytes int
	// HTTPClient, when set, sends the requests. Its Timeout, if any, bounds
	// a whole streamed answer, so it is best left zero. A redirect to
	// another host is never followed: the key must not go there.
	HTTPClient *http.Client
	// WrapTransport, when set, wraps the transport the requests go
	// through: tine records the model calls of a turn this way.
	WrapTransport func(http.RoundTripper) http.RoundTripper

	envErr error // a setting in the environment that could not be read
}

// ConfigFromEnv reads ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_MODEL and TINE_MAX_RETRY_WAIT. A TINE_MAX_RETRY_WAIT that is no
// duration fails every turn, saying so, rather than being ignored.
func ConfigFromEnv() Config {
	wait, err := apihttp.MaxRetryWaitFromEnv()
	return Config{
		BaseURL:      os.Getenv("ANTHROPIC_BASE_URL"),
		APIKey:       os.Getenv("ANTHROPIC_API_KEY"),
		Model:        os.Getenv("ANTHROPIC_MODEL"),
		MaxRetryWait: wait,
		envErr:       err,
	}
}

// Harness continues a run through the Anthropic Messages API. It sends the
// whole prefix on every turn, so it can fork anywhere; a reply with tool
// calls ends the turn with the calls recorded.
type Harness struct {
	cfg Config
	api *apihttp.Client
	now func() time.Time
}

var _ harness.Harness = (*Harness)(nil)

// New returns a Harness for cfg, filling its zero fields with defaults.
func New(cfg Config) *Harness {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultMaxTokens
	}
	path := "/v1/messages"
	if strings.HasSuffix(cfg.BaseURL, "/v1") {
		path = "/messages"
	}
	header := http.Header{}
	header.Set("anthropic-version", APIVersion)
	if cfg.APIKey != "" {
		header.Set("x-api-key", cfg.APIKey)
	}
	api := apihttp.New(apihttp.Config{
		Name:           "anthropic",
		BaseURL:        cfg.BaseURL,
		Path:           path,
		APIKey:         cfg.APIKey,
		Header:         header,
		EndMarker:      "message_stop",
		Retryable:      retryable,
		ConnectTimeout: cfg.ConnectTimeout,
		StallTimeout:   cfg.StallTimeout,
		MaxRetries:     cfg.MaxRetries,
		MaxRetryWait:   cfg.MaxRetryWait,
		MaxEventBytes:  cfg.MaxEventBytes,
		HTTPClient:     cfg.HTTPClient,
		WrapTransport:  cfg.WrapTransport,
	})
	return &Harness{cfg: cfg, api: api, now: time.Now}
}

// WithTransport returns a Harness like h whose requests go through
// wrap(transport) (Config.WrapTransport).
func (h *Harness) WithTransport(wrap func(http.RoundTripper) http.RoundTripper) *Harness {
	cfg := h.cfg
	cfg.WrapTransport = wrap
	return New(cfg)
}

// Name implements harness.Harness.
func (*Harness) Name() string { return Agent.Name }

// Capabilities implements harness.Harness.
func (*Harness) Capabilities() harness.Capabilities { return Agent.Caps }

// Turn implements harness.Harness. It emits the user message (when Input is
// set), a delta for each piece of streamed text, and the finished assistant
// message.
func (h *Harness) Turn(ctx context.Context, req harness.TurnRequest, emit func(harness.Event)) error {
	if h.cfg.envErr != nil {
		return fmt.Errorf("%s: %w", h.Name(), h.cfg.envErr)
	}
	modelName := req.Model
	if modelName == "" {
		modelName = h.cfg.Model
	}
	if modelName == "" {
		return errors.New("anthropic: no model: pass --model or set ANTHROPIC_MODEL")
	}
	msgs, user := req.Conversation(h.now())
	wreq := buildRequest(model.PairCalls(msgs, notRun))
	if len(wreq.Messages) == 0 {
		return errors.New("anthropic: nothing to send: the prefix is empty and there is no new message")
	}
	wreq.Model, wreq.MaxTokens, wreq.Stream = modelName, h.cfg.MaxTokens, true
	body, err := json.Marshal(wreq)
	if err != nil {
		return fmt.Errorf("anthropic: encode request: %w", err)
	}
	if user != nil {
		emit(harness.Event{Kind: harness.EventMessage, Message: *user})
	}
	msg, err := h.call(ctx, body, emit)
	if msg.Model == "" {
		msg.Model = modelName
	}
	if err != nil {
		if len(msg.Parts) == 0 {
			return err
		}
		// Text reached the screen before the stream failed: it is kept,
		// marked partial, rather than lost with the turn.
		note, err := apihttp.Partial(err, msg)
		emit(harness.Event{Kind: harness.EventMessage, Message: msg})
		emit(harness.Event{Kind: harness.EventNote, Note: "anthropic: " + note})
		return err
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg})
	return nil
}

// call posts body, retrying what is worth retrying, and returns the
// assembled answer. When the stream fails after text was shown, it returns
// the error with the partial answer: what streamed, without its tool calls,
// whose input may be cut off.
func (h *Harness) call(ctx context.Context, body []byte, emit func(harness.Event)) (model.Message, error) {
	var a *assembler
	err := h.api.Post(ctx, body, func() apihttp.Stream {
		a = &assembler{emit: emit}
		return a
	})
	if err != nil {
		if a != nil && a.Shown() {
			return a.partial(h.now()), err
		}
		return model.Message{}, err
	}
	return a.message(h.now()), nil
}

// retryable decides on a non-200 answer: 408, 429 and 5xx (529 is
// overloaded) are tried again unless the server says x-should-retry: false,
// and anything is when it says true.
func retryable(resp *http.Response) bool {
	switch resp.Header.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return apihttp.RetryableStatus(resp.StatusCode)
}

// --- the stream ---

type wireUsage struct {
	InputTokens              apihttp.Tokens `json:"input_tokens"`
	OutputTokens             apihttp.Tokens `json:"output_tokens"`
	CacheCreationInputTokens apihttp.Tokens `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     apihttp.Tokens `json:"cache_read_input_tokens"`
}

// streamEvent is any event of a Messages stream; each type fills some fields.
type streamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID    string    `json:"id"`
		Model string    `json:"model"`
		Usage wireUsage `json:"usage"`
	} `json:"message"`
	Index        int             `json:"index"`
	ContentBlock json.RawMessage `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

type contentBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Thinking string          `json:"thinking"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Input    json.RawMessage `json:"input"`
}

type blockBuilder struct {
	kind     string
	id, name string
	text     strings.Builder // text, thinking, or the tool input's JSON
	raw      json.RawMessage // blocks of other kinds, kept whole
}

// assembler builds the assistant message from the events of one stream.
type assembler struct {
	emit      func(harness.Event)
	id, model string
	blocks    []*blockBuilder
	byIndex   map[int]*blockBuilder
	usage     model.Usage
	badUsage  bool // a count was corrupt: the usage is dropped
	stop      string
	emitted   bool
}

var _ apihttp.Stream = (*assembler)(nil)

// Event implements apihttp.Stream.
func (a *assembler) Event(name, data string) (bool, error) {
	var ev streamEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		return false, &apihttp.MalformedError{Err: err, Data: data}
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "message_start":
		if m := ev.Message; m != nil {
			a.id, a.model = m.ID, m.Model
			a.addUsage(m.Usage)
		}
	case "content_block_start":
		var cb contentBlock
		if err := json.Unmarshal(ev.ContentBlock, &cb); err != nil {
			return false, &apihttp.MalformedError{Err: err, Data: data}
		}
		b := &blockBuilder{kind: cb.Type, id: cb.ID, name: cb.Name}
		switch cb.Type {
		case "text":
			a.text(b, cb.Text)
		case "thinking":
			b.text.WriteString(cb.Thinking)
		case "tool_use":
			// The input streams as JSON deltas; a start carrying a whole
			// input (some proxies do) is kept unless deltas follow.
			if in := bytes.TrimSpace(cb.Input); len(in) > 0 && string(in) != "{}" {
				b.raw = in
			}
		default:
			b.raw = ev.ContentBlock
		}
		if a.byIndex == nil {
			a.byIndex = map[int]*blockBuilder{}
		}
		a.byIndex[ev.Index] = b
		a.blocks = append(a.blocks, b)
	case "content_block_delta":
		b := a.byIndex[ev.Index]
		if b == nil || ev.Delta == nil {
			return false, &apihttp.MalformedError{Err: fmt.Errorf("delta for block %d that never started", ev.Index), Data: data}
		}
		switch ev.Delta.Type {
		case "text_delta":
			a.text(b, ev.Delta.Text)
		case "thinking_delta":
			b.text.WriteString(ev.Delta.Thinking)
		case "input_json_delta":
			b.text.WriteString(ev.Delta.PartialJSON)
		}
		// signature_delta, citations_delta: not stored.
	case "message_delta":
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			a.stop = ev.Delta.StopReason
		}
		if ev.Usage != nil {
			a.addUsage(*ev.Usage)
		}
	case "message_stop":
		return true, nil
	case "error":
		se := &apihttp.StreamError{What: "error", Message: "(no message)"}
		if ev.Error != nil {
			se.What, se.Message = ev.Error.Type, ev.Error.Message
		}
		switch se.What {
		case "overloaded_error", "api_error", "rate_limit_error":
			// Passing trouble: worth another try while no text is shown.
			se.Retry = true
		}
		return false, se
	}
	// ping, content_block_stop and event types added later need nothing.
	return false, nil
}

// Shown implements apihttp.Stream.
func (a *assembler) Shown() bool { return a.emitted }

// Complete implements apihttp.Stream: only message_stop ends an answer.
func (*assembler) Complete() bool { return false }

func (a *assembler) text(b *blockBuilder, s string) {
	if s == "" {
		return
	}
	b.text.WriteString(s)
	a.emitted = true
	a.emit(harness.Event{Kind: harness.EventDelta, Delta: s})
}

// addUsage takes each count the event reports: message_start has the
// input side, message_delta the final output (and, lately, input again).
// A count that is not a token count drops the message's usage, with a
// note, rather than failing the answer or being stored.
func (a *assembler) addUsage(u wireUsage) {
	if a.badUsage {
		return
	}
	if bad := apihttp.FirstBad(map[string]apihttp.Tokens{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens, "cache_read_input_tokens": u.CacheReadInputTokens}); bad != "" {
		a.usage, a.badUsage = model.Usage{}, true
		a.emit(harness.Event{Kind: harness.EventNote, Note: "anthropic: the server's usage was dropped: " + bad})
		return
	}
	if u.InputTokens.N > 0 {
		a.usage.InputTokens = u.InputTokens.N
	}
	if u.OutputTokens.N > 0 {
		a.usage.OutputTokens = u.OutputTokens.N
	}
	if u.CacheReadInputTokens.N > 0 {
		a.usage.CacheReadTokens = u.CacheReadInputTokens.N
	}
	if u.CacheCreationInputTokens.N > 0 {
		a.usage.CacheWriteTokens = u.CacheCreationInputTokens.N
	}
}

func (a *assembler) message(now time.Time) model.Message {
	m := model.Message{Role: model.Assistant, Model: a.model, Usage: a.usage, Time: now, NativeID: a.id}
	for _, b := range a.blocks {
		switch b.kind {
		case "text":
			if b.text.Len() > 0 {
				m.Parts = append(m.Parts, model.Part{Kind: model.Text, Text: b.text.String()})
			}
		case "thinking":
			m.Parts = append(m.Parts, model.Part{Kind: model.Thinking, Text: b.text.String()})
		case "tool_use":
			input := b.text.String()
			if input == "" {
				input = string(b.raw)
			}
			if input == "" {
				input = "{}"
			}
			m.Parts = append(m.Parts, model.Part{Kind: model.ToolCall, ToolCallID: b.id, ToolName: b.name, ToolInput: input})
		case "redacted_thinking":
			// Opaque without its signature, which tine does not keep.
		default:
			m.Parts = append(m.Parts, model.Part{Kind: model.Other, Raw: string(b.raw)})
		}
	}
	return m
}

// partial is the message so far of a stream that failed: its text,
// thinking and other blocks, without tool calls.
func (a *assembler) partial(now time.Time) model.Message {
	m := a.message(now)
	m.Parts = slices.DeleteFunc(m.Parts, func(p model.Part) bool { return p.Kind == model.ToolCall })
	return m
}

// --- cost ---

// Cost estimates what u cost on Anthropic's API at list price
// (model.ListPrice). known is false for a model not in tine's table, or
// not Anthropic's: an unknown price is not guessed.
func (h *Harness) Cost(modelName string, u model.Usage) (usd float64, known bool) {
	p, ok := model.ListPrice(modelName)
	if !ok || p.Provider != "anthropic" {
		return 0, false
	}
	return p.Cost(u), true
}

// Describe implements harness.Describer: the API needs no program here,
// only a key and a model.
func (h *Harness) Describe(context.Context) harness.Description {
	d := harness.Description{Installed: true, Path: h.cfg.BaseURL}
	if h.cfg.APIKey == "" && h.cfg.BaseURL == DefaultBaseURL {
		d.Problem = "ANTHROPIC_API_KEY is not set"
	}
	if h.cfg.envErr != nil {
		d.Problem = h.cfg.envErr.Error()
	}
	return d
}
