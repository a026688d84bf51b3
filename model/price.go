package model

import (
	"regexp"
	"sort"
	"strings"
)

// Price is what a model's tokens cost, in USD per million, at its
// provider's list price (standard tier, no batch discount).
type Price struct {
	// Provider is whose API sells the model at this price: "anthropic"
	// or "openai". A model API harness prices only its own provider's
	// models.
	Provider string
	// In is uncached input, CacheWrite input written to the prompt cache
	// (Anthropic's 5-minute rate; OpenAI charges it as input), CacheRead
	// input read from it, Out output (thinking included).
	In, CacheWrite, CacheRead, Out float64
	// Long: above 200k prompt tokens (Sonnet 4 and 4.5 with the 1M-context
	// beta) input and cache cost twice as much and output 1.5 times.
	Long bool
}

// prices are the list prices tine knows, from the providers' pricing
// pages (anthropic.com/pricing, openai.com/api/pricing) as published when
// each entry was written: the first ones in November 2026 (the model API
// harnesses' tables, moved here unchanged), the Claude 4.6, GPT-5.1,
// GPT-5.5 and Codex entries on 1 December 2026, checked against
// price lists published between March and June 2026. Gemini models are
// not here: --max-cost refuses them (ARCHITECTURE.md, budgets). A model
// not in the table has no price: none is guessed.
var prices = map[string]Price{
	"claude-opus-4-6":   {"anthropic", 5, 6.25, 0.50, 25, false},
	"claude-sonnet-4-6": {"anthropic", 3, 3.75, 0.30, 15, false},
	"claude-opus-4-5":   {"anthropic", 5, 6.25, 0.50, 25, false},
	"claude-opus-4-1":   {"anthropic", 15, 18.75, 1.50, 75, false},
	"claude-opus-4":     {"anthropic", 15, 18.75, 1.50, 75, false},
	"claude-opus-4-0":   {"anthropic", 15, 18.75, 1.50, 75, false},
	"claude-sonnet-4-5": {"anthropic", 3, 3.75, 0.30, 15, true},
	"claude-sonnet-4":   {"anthropic", 3, 3.75, 0.30, 15, true},
	"claude-sonnet-4-0": {"anthropic", 3, 3.75, 0.30, 15, true},
	"claude-3-7-sonnet": {"anthropic", 3, 3.75, 0.30, 15, false},
	"claude-haiku-4-5":  {"anthropic", 1, 1.25, 0.10, 5, false},
	"claude-3-5-haiku":  {"anthropic", 0.80, 1, 0.08, 4, false},
	"claude-3-haiku":    {"anthropic", 0.25, 0.30, 0.03, 1.25, false},

	"gpt-4o":            {"openai", 2.50, 2.50, 1.25, 10, false},
	"gpt-4o-mini":       {"openai", 0.15, 0.15, 0.075, 0.60, false},
	"gpt-4.1":           {"openai", 2, 2, 0.50, 8, false},
	"gpt-4.1-mini":      {"openai", 0.40, 0.40, 0.10, 1.60, false},
	"gpt-4.1-nano":      {"openai", 0.10, 0.10, 0.025, 0.40, false},
	"o3":                {"openai", 2, 2, 0.50, 8, false},
	"o4-mini":           {"openai", 1.10, 1.10, 0.275, 4.40, false},
	"gpt-5":             {"openai", 1.25, 1.25, 0.125, 10, false},
	"gpt-5-mini":        {"openai", 0.25, 0.25, 0.025, 2, false},
	"gpt-5-nano":        {"openai", 0.05, 0.05, 0.005, 0.40, false},
	"gpt-5-codex":       {"openai", 1.25, 1.25, 0.125, 10, false},
	"gpt-5.1":           {"openai", 1.25, 1.25, 0.125, 10, false},
	"gpt-5.1-codex":     {"openai", 1.25, 1.25, 0.125, 10, false},
	"gpt-5.1-codex-max": {"openai", 1.25, 1.25, 0.125, 10, false},
	"gpt-5.5":           {"openai", 5, 5, 0.50, 30, false},
}

// snapshot matches a dated snapshot or alias suffix: "-20250929",
// "-2024-08-06", "-latest". Any other suffix names another model.
var snapshot = regexp.MustCompile(`-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$`)

// ListPrice is the price of the model named name, as its provider's API
// names it ("claude-sonnet-4-5-20250929", "gpt-4o"); a snapshot suffix
// is dropped. known is false for a model not in the table.
func ListPrice(name string) (p Price, known bool) {
	p, known = prices[snapshot.ReplaceAllString(name, "")]
	return p, known
}

// PriceOf is ListPrice for a model as an agent names it: also
// "provider/model" (pi's "anthropic/claude-sonnet-4-5"), when the
// provider is the model's own.
func PriceOf(name string) (Price, bool) {
	if provider, bare, ok := strings.Cut(name, "/"); ok {
		p, known := ListPrice(bare)
		return p, known && p.Provider == provider
	}
	return ListPrice(name)
}

// Cost is what u cost at p, in USD.
func (p Price) Cost(u Usage) float64 {
	inMul, outMul := 1.0, 1.0
	if p.Long && u.InputTokens+u.CacheReadTokens+u.CacheWriteTokens > 200_000 {
		inMul, outMul = 2, 1.5
	}
	usd := inMul*(float64(u.InputTokens)*p.In+float64(u.CacheWriteTokens)*p.CacheWrite+float64(u.CacheReadTokens)*p.CacheRead) +
		outMul*float64(u.OutputTokens)*p.Out
	return usd / 1e6
}

// PricedModels are the names of the models tine knows the price of, in
// order.
func PricedModels() []string {
	out := make([]string, 0, len(prices))
	for name := range prices {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
