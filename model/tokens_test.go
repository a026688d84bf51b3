package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseTokens(t *testing.T) {
	for raw, want := range map[string]int64{"0": 0, "12": 12, "12.9": 12, "1e3": 1000, "9007199254740992": MaxTokens} {
		n, err := ParseTokens(raw)
		assert.NoError(t, err, raw)
		assert.Equal(t, want, n, raw)
	}
	for _, raw := range []string{"-1", "9007199254740993000", "1e400", "99999999999999999999", "\"12\"", "true", "null", ""} {
		_, err := ParseTokens(raw)
		assert.Error(t, err, raw)
	}
	_, err := CheckTokens(-5)
	assert.EqualError(t, err, "-5 is not a token count in 0..2^53")
	n, err := CheckTokens(42)
	assert.NoError(t, err)
	assert.Equal(t, int64(42), n)
}
