package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBudget(t *testing.T) {
	for _, c := range []struct {
		tokens, usd string
		want        Budget
	}{
		{"", "", Budget{}},
		{"10000", "", Budget{Tokens: 10000}},
		{"10,000", "", Budget{Tokens: 10000}},
		{" 10_000 ", "", Budget{Tokens: 10000}},
		{"", "0.5", Budget{USD: 0.5}},
		{"", "$2", Budget{USD: 2}},
		{"1", "0.01", Budget{Tokens: 1, USD: 0.01}},
	} {
		b, err := ParseBudget(c.tokens, c.usd)
		require.NoError(t, err, c)
		assert.Equal(t, c.want, b, c)
	}
	for _, c := range [][2]string{{"0", ""}, {"-5", ""}, {"ten", ""}, {"1.5", ""}, {"1e3", ""}, {"99999999999999999999", ""},
		{"", "0"}, {"", "-1"}, {"", "NaN"}, {"", "Inf"}, {"", "$"}, {"", "one"}, {"", "1,5"}} {
		_, err := ParseBudget(c[0], c[1])
		if assert.Error(t, err, c) {
			if c[0] != "" {
				assert.Contains(t, err.Error(), "--max-tokens", c)
			} else {
				assert.Contains(t, err.Error(), "--max-cost", c)
			}
		}
	}
}

func TestBudgetOver(t *testing.T) {
	b := Budget{Tokens: 10_000, USD: 0.5}
	assert.NoError(t, b.Over(10_000, 0.5, false), "reaching the bound is not going over it")
	err := b.Over(12_400, 0, false)
	require.ErrorIs(t, err, ErrOverBudget)
	assert.EqualError(t, err, "budget: 12,400 tokens spent, over --max-tokens 10,000")
	assert.EqualError(t, b.Over(10, 0.0123+0.5, false), "budget: $0.5123 spent, over --max-cost $0.50")
	assert.Error(t, b.Over(10_000, 0, true), "a turn that would start at its bound has nothing left")
	assert.NoError(t, Budget{}.Over(1<<40, 1e6, true), "no budget, no bound")
	assert.Equal(t, "10,000 tokens, $0.50", b.Describe())
}

func TestGroupedAndUSD(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 12400: "12,400", 1234567: "1,234,567", -1234: "-1,234"} {
		assert.Equal(t, want, Grouped(n))
	}
	for v, want := range map[float64]string{0: "$0.00", 12.4: "$12.40", 0.5: "$0.50", 0.0123: "$0.0123", 0.000012: "$0.000012", 3: "$3.00"} {
		assert.Equal(t, want, USD(v))
	}
}

func TestPriceOf(t *testing.T) {
	p, ok := PriceOf("claude-sonnet-4-5-20250929")
	require.True(t, ok)
	assert.Equal(t, "anthropic", p.Provider)
	// pi names a model with its provider.
	_, ok = PriceOf("anthropic/claude-haiku-4-5")
	assert.True(t, ok)
	_, ok = PriceOf("openai/gpt-5-codex")
	assert.True(t, ok)
	for _, name := range []string{"", "tine-test-model", "gemini-2.5-pro", "google/gemini-2.5-pro", "openrouter/claude-haiku-4-5", "anthropic/gpt-4o", "claude-opus-4-5-preview"} {
		_, ok := PriceOf(name)
		assert.False(t, ok, name)
	}
	// 1M uncached input and 100k output of GPT-5: $1.25 + $1.
	p, _ = PriceOf("gpt-5")
	assert.InDelta(t, 2.25, p.Cost(Usage{InputTokens: 1_000_000, OutputTokens: 100_000}), 1e-9)
}
