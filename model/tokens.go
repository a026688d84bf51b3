package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxTokens is the largest token count tine takes from a transcript or a
// model API: 2^53, past which a JSON number no longer holds every integer
// exactly in the agents' own languages. A count outside 0..MaxTokens is
// corrupt (an overflow, a sign error) and is never stored.
const MaxTokens = 1 << 53

// ParseTokens reads a token count from the text of a JSON number; a
// fraction is cut off. A count that is negative, above MaxTokens or not a
// number is an error that says which.
func ParseTokens(raw string) (int64, error) {
	// Plain digits, the common case, are read without ParseFloat.
	if n, ok := digits(raw); ok {
		return n, nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	// raw is cloned for the error: it does not escape, so callers'
	// string(bytes) conversions need not allocate.
	if err != nil && !isRange(err) {
		return 0, fmt.Errorf("%.40q is not a token count", strings.Clone(raw))
	}
	if err != nil || f < 0 || f > MaxTokens || math.IsNaN(f) {
		return 0, fmt.Errorf("%.40s is not a token count in 0..2^53", strings.Clone(raw))
	}
	return int64(f), nil
}

// digits reads up to 15 decimal digits (less than 2^53), the form token
// counts take.
func digits(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// CheckTokens is ParseTokens for a number already decoded.
func CheckTokens(f float64) (int64, error) {
	if f < 0 || f > MaxTokens || math.IsNaN(f) {
		return 0, fmt.Errorf("%s is not a token count in 0..2^53", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return int64(f), nil
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
