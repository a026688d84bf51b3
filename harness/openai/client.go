package openai

import (
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
// OPENAI_BASE_URL says otherwise.
const DefaultBaseURL = "https://api.openai.com/v1"

// Defaults for the zero fields of a Config.
const (
	DefaultConnectTimeout = apihttp.DefaultConnectTimeout
	DefaultStallTimeout   = apihttp.DefaultStallTimeout
	DefaultMaxRetries     = apihttp.DefaultMaxRetries
	DefaultMaxRetryWait   = apihttp.DefaultMaxRetryWait
	DefaultMaxEventBytes  = apihttp.DefaultMaxEventBytes
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
	// backoff or from the server's retry-after (TINE_MAX_RETRY_WAIT).
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

// ConfigFromEnv reads OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL and
// TINE_MAX_RETRY_WAIT. A TINE_MAX_RETRY_WAIT that is no duration fails
// every turn, saying so, rather than being ignored.
func ConfigFromEnv() Config {
	wait, err := apihttp.MaxRetryWaitFromEnv()
	return Config{
		BaseURL:      os.Getenv("OPENAI_BASE_URL"),
		APIKey:       os.Getenv("OPENAI_API_KEY"),
		Model:        os.Getenv("OPENAI_MODEL"),
		MaxRetryWait: wait,
		envErr:       err,
	}
}

// Harness continues a run through an OpenAI-compatible Chat Completions
// server (OpenAI, Ollama, llama.cpp, vLLM, OpenRouter). It sends the whole
// prefix on every turn, so it can fork anywhere; it does not run tools: a
// reply with tool calls ends the turn with the calls recorded.
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
	header := http.Header{}
	if cfg.APIKey != "" {
		header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	api := apihttp.New(apihttp.Config{
		Name:           "openai",
		BaseURL:        cfg.BaseURL,
		Path:           "/chat/completions",
		APIKey:         cfg.APIKey,
		Header:         header,
		EndMarker:      "[DONE]",
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
		return errors.New("openai: no model: pass --model or set OPENAI_MODEL")
	}
	msgs, user := req.Conversation(h.now())
	wire := toWire(model.PairCalls(msgs, notRun))
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
		emit(harness.Event{Kind: harness.EventNote, Note: "openai: " + note})
		return err
	}
	emit(harness.Event{Kind: harness.EventMessage, Message: msg})
	return nil
}

// call posts body, retrying what is worth retrying (408, 429, 5xx, a
// failure before any text arrived), and returns the assembled answer. When
// the stream fails after text was shown, it returns the error with the
// partial answer: what streamed, without its tool calls, whose input may be
// cut off.
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
		PromptTokens        apihttp.Tokens `json:"prompt_tokens"`
		CompletionTokens    apihttp.Tokens `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens apihttp.Tokens `json:"cached_tokens"`
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
	emitted         bool
}

var _ apihttp.Stream = (*assembler)(nil)

// Event implements apihttp.Stream.
func (a *assembler) Event(_, data string) (bool, error) {
	if data == "[DONE]" {
		return true, nil
	}
	var c streamChunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return false, &apihttp.MalformedError{Err: err, Data: data}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return false, &apihttp.StreamError{What: "an error", Message: apihttp.ErrorMessage([]byte(`{"error":` + string(c.Error) + `}`))}
	}
	if c.ID != "" {
		a.id = c.ID
	}
	if c.Model != "" {
		a.model = c.Model
	}
	if u := c.Usage; u != nil {
		if bad := apihttp.FirstBad(map[string]apihttp.Tokens{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
			"cached_tokens": u.PromptTokensDetails.CachedTokens}); bad != "" {
			// A corrupt count never fails the answer nor gets stored.
			a.usage = model.Usage{}
			a.emit(harness.Event{Kind: harness.EventNote, Note: "openai: the server's usage was dropped: " + bad})
		} else {
			cached := u.PromptTokensDetails.CachedTokens.N
			// prompt_tokens counts cached tokens too; model.Usage counts each once.
			a.usage = model.Usage{InputTokens: max(u.PromptTokens.N-cached, 0), OutputTokens: u.CompletionTokens.N, CacheReadTokens: cached}
		}
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

// Shown implements apihttp.Stream.
func (a *assembler) Shown() bool { return a.emitted }

// Complete implements apihttp.Stream: some servers close after the finish
// chunk without [DONE].
func (a *assembler) Complete() bool { return a.finish != "" }

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

// partial is the message so far of a stream that failed: its thinking and
// text, without tool calls.
func (a *assembler) partial(now time.Time) model.Message {
	m := a.message(now)
	m.Parts = slices.DeleteFunc(m.Parts, func(p model.Part) bool { return p.Kind == model.ToolCall })
	return m
}

// --- cost ---

// Cost estimates what u cost on OpenAI's API at list price
// (model.ListPrice). known is false for models not in tine's table (local
// models, other providers, new models): an unknown price is not guessed.
func (h *Harness) Cost(modelName string, u model.Usage) (usd float64, known bool) {
	p, ok := model.ListPrice(modelName)
	if !ok || p.Provider != "openai" {
		return 0, false
	}
	return p.Cost(u), true
}

// notRun answers a tool call nothing answered: the API rejects a call
// without a result, and this harness runs no tools.
const notRun = "not run: this tool call was never executed"

// Describe implements harness.Describer: the API needs no program here,
// only where to send requests, a key (not for local servers) and a model.
func (h *Harness) Describe(context.Context) harness.Description {
	d := harness.Description{Installed: true, Path: h.cfg.BaseURL}
	if h.cfg.APIKey == "" && h.cfg.BaseURL == DefaultBaseURL {
		d.Problem = "OPENAI_API_KEY is not set (needed for " + DefaultBaseURL + ")"
	}
	if h.cfg.envErr != nil {
		d.Problem = h.cfg.envErr.Error()
	}
	return d
}
