package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Budget bounds what a fork spends of its own (rule 6): its turns are
// stopped once it has spent more. A zero field is no bound.
type Budget struct {
	// Tokens bounds the tokens its own messages report: Usage.Total,
	// input (uncached, cache reads and cache writes) and output, the
	// count tine ls shows.
	Tokens int64
	// USD bounds what its tokens cost at list price (PriceOf), or what
	// its agent reports it spent, whichever is more.
	USD float64
}

// IsZero reports whether b bounds nothing.
func (b Budget) IsZero() bool { return b == Budget{} }

// ErrOverBudget is what a turn stopped by its budget fails with.
var ErrOverBudget = errors.New("budget")

// Over says how spending tokens and usd goes over b ("" when it does
// not): "budget: 12,400 tokens spent, over --max-tokens 10,000". atStart
// asks about a turn about to begin, which has nothing left to spend once
// it has reached its bound.
func (b Budget) Over(tokens int64, usd float64, atStart bool) error {
	over := func(spent, limit float64) bool { return spent > limit || (atStart && spent >= limit) }
	switch {
	case b.Tokens > 0 && over(float64(tokens), float64(b.Tokens)):
		return fmt.Errorf("%w: %s tokens spent, over --max-tokens %s", ErrOverBudget, Grouped(tokens), Grouped(b.Tokens))
	case b.USD > 0 && over(usd, b.USD):
		return fmt.Errorf("%w: %s spent, over --max-cost %s", ErrOverBudget, USD(usd), USD(b.USD))
	}
	return nil
}

// Describe is b in words: "10,000 tokens, $0.50", "" when it bounds
// nothing.
func (b Budget) Describe() string {
	var parts []string
	if b.Tokens > 0 {
		parts = append(parts, Grouped(b.Tokens)+" tokens")
	}
	if b.USD > 0 {
		parts = append(parts, USD(b.USD))
	}
	return strings.Join(parts, ", ")
}

// ParseBudget reads the budget a person typed (--max-tokens,
// --max-cost; "" leaves a bound out). Tokens are a whole number, with
// optional "," or "_" between digits; a cost is dollars, with an
// optional "$". Zero, negative and anything else is refused, saying which.
func ParseBudget(tokens, usd string) (Budget, error) {
	var b Budget
	if s := strings.TrimSpace(tokens); s != "" {
		n, err := strconv.ParseInt(strings.NewReplacer(",", "", "_", "").Replace(s), 10, 64)
		if err != nil || n <= 0 || n > MaxTokens {
			return Budget{}, fmt.Errorf("--max-tokens is a number of tokens above 0, such as 20000, not %q", OneLine(tokens, 40))
		}
		b.Tokens = n
	}
	if s := strings.TrimPrefix(strings.TrimSpace(usd), "$"); strings.TrimSpace(usd) != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
			return Budget{}, fmt.Errorf("--max-cost is an amount of US dollars above 0, such as 0.50, not %q", OneLine(usd, 40))
		}
		b.USD = f
	}
	return b, nil
}

// Grouped is n with its thousands grouped: 12,400.
func Grouped(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// USD is an amount of dollars with its cents, and with more digits when
// it is under a dollar and they are not zero: $12.40, $0.50, $0.0123.
func USD(v float64) string {
	if v >= 1 || v <= 0 {
		return fmt.Sprintf("$%.2f", v)
	}
	s := fmt.Sprintf("%.6f", v)
	for strings.HasSuffix(s, "0") && len(s) > len("0.00") {
		s = s[:len(s)-1]
	}
	return "$" + s
}
