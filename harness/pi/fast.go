package pi

import (
	"bytes"
	"encoding/json"
	"strconv"

	"tine/internal/jsonscan"
)

// fastEntry decodes a "message" entry line in one pass with the agents'
// one JSON scanner (jsonscan.Decoder, which validates as it reads), about
// three times faster than encoding/json, which validates every line in a
// pass of its own before decoding it in another. It reports false
// whenever the line is anything but the plain shape pi writes (a syntax
// error, a type mismatch, a duplicate key, a key with escapes or one that
// differs only in case from a field, string content, the fields of pi's
// own roles...), and the caller then decodes the line with encoding/json,
// which has the last word. When it reports true, e holds exactly what
// json.Unmarshal would have put there (FuzzFastEntry checks this against
// encoding/json).
func fastEntry(line []byte, e *entry) bool {
	d := jsonscan.NewDecoder(line)
	var seen uint16
	ok := object(d, func(k []byte) bool {
		switch string(k) {
		case "type":
			return once(&seen, 1) && str(d, &e.Type)
		case "id":
			return once(&seen, 2) && str(d, &e.ID)
		case "parentId":
			return once(&seen, 4) && strPtr(d, &e.ParentID)
		case "timestamp":
			return once(&seen, 8) && str(d, &e.Timestamp)
		case "message":
			if !once(&seen, 16) {
				return false
			}
			if d.Null() {
				e.Message = nil
				return true
			}
			e.Message = new(message)
			return decodeMessage(d, e.Message)
		}
		return unknown(d, k, entryKeys)
	})
	return ok && d.End()
}

// The JSON names of each struct's fields: a key that differs from one only
// in case would be matched by encoding/json, so it is left to it.
var (
	entryKeys   = []string{"type", "id", "parentId", "timestamp", "message", "provider", "modelId", "summary", "tokensBefore", "fromId", "customType", "content", "name"}
	messageKeys = []string{"role", "content", "timestamp", "provider", "model", "usage", "stopReason", "errorMessage", "toolCallId", "toolName", "isError", "command", "output", "exitCode", "cancelled", "truncated", "fullOutputPath", "excludeFromContext", "summary", "tokensBefore"}
	usageKeys   = []string{"input", "output", "cacheRead", "cacheWrite", "cost"}
	costKeys    = []string{"total"}
	blockKeys   = []string{"type", "text", "thinking", "redacted", "id", "name", "arguments", "data", "mimeType"}
)

// object reads an object whose keys are all written as they read: a key
// with escapes is left to encoding/json.
func object(d *jsonscan.Decoder, member func(key []byte) bool) bool {
	return d.Object(func(k []byte, verbatim bool) bool { return verbatim && member(k) })
}

func decodeMessage(d *jsonscan.Decoder, m *message) bool {
	var seen uint16
	return object(d, func(k []byte) bool {
		switch string(k) {
		case "role":
			return once(&seen, 1) && str(d, &m.Role)
		case "content":
			return once(&seen, 2) && blocks(d, &m.Content)
		case "timestamp":
			return once(&seen, 4) && raw(d, &m.Timestamp)
		case "provider":
			return once(&seen, 8) && str(d, &m.Provider)
		case "model":
			return once(&seen, 16) && str(d, &m.Model)
		case "usage":
			if !once(&seen, 32) {
				return false
			}
			if d.Null() {
				m.Usage = nil
				return true
			}
			m.Usage = new(usage)
			return decodeUsage(d, m.Usage)
		case "stopReason":
			return once(&seen, 64) && str(d, &m.StopReason)
		case "errorMessage":
			return once(&seen, 128) && str(d, &m.ErrorMessage)
		case "toolCallId":
			return once(&seen, 256) && str(d, &m.ToolCallID)
		case "toolName":
			return once(&seen, 512) && str(d, &m.ToolName)
		case "isError":
			return once(&seen, 1024) && boolean(d, &m.IsError)
		}
		return unknown(d, k, messageKeys)
	})
}

func decodeUsage(d *jsonscan.Decoder, u *usage) bool {
	var seen uint16
	return object(d, func(k []byte) bool {
		switch string(k) {
		case "input":
			return once(&seen, 1) && float(d, &u.Input)
		case "output":
			return once(&seen, 2) && float(d, &u.Output)
		case "cacheRead":
			return once(&seen, 4) && float(d, &u.CacheRead)
		case "cacheWrite":
			return once(&seen, 8) && float(d, &u.CacheWrite)
		case "cost":
			if !once(&seen, 16) {
				return false
			}
			if d.Null() {
				u.Cost = nil
				return true
			}
			u.Cost = &struct {
				Total float64 `json:"total"`
			}{}
			var seenTotal uint16
			return object(d, func(k []byte) bool {
				if string(k) == "total" {
					return once(&seenTotal, 1) && float(d, &u.Cost.Total)
				}
				return unknown(d, k, costKeys)
			})
		}
		return unknown(d, k, usageKeys)
	})
}

func blocks(d *jsonscan.Decoder, out *[]block) bool {
	if d.Null() {
		*out = nil
		return true
	}
	bs := []block{}
	ok := d.Array(func() bool {
		bs = append(bs, block{})
		if d.Null() {
			return true // encoding/json leaves the element zero
		}
		return decodeBlock(d, &bs[len(bs)-1])
	})
	*out = bs
	return ok
}

func decodeBlock(d *jsonscan.Decoder, b *block) bool {
	var seen uint16
	return object(d, func(k []byte) bool {
		switch string(k) {
		case "type":
			return once(&seen, 1) && str(d, &b.Type)
		case "text":
			return once(&seen, 2) && str(d, &b.Text)
		case "thinking":
			return once(&seen, 4) && str(d, &b.Thinking)
		case "redacted":
			return once(&seen, 8) && boolean(d, &b.Redacted)
		case "id":
			return once(&seen, 16) && str(d, &b.ID)
		case "name":
			return once(&seen, 32) && str(d, &b.Name)
		case "arguments":
			return once(&seen, 64) && raw(d, &b.Arguments)
		case "data":
			return once(&seen, 128) && raw(d, &b.Data)
		case "mimeType":
			return once(&seen, 256) && str(d, &b.MimeType)
		}
		return unknown(d, k, blockKeys)
	})
}

// once marks bit in seen, reporting false if it was already set: a key
// given twice, which encoding/json resolves in its own ways.
func once(seen *uint16, bit uint16) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// unknown skips the value of a key the struct has no field for, unless the
// key differs from a field's only in case (encoding/json would match it:
// bytes.EqualFold is its rule).
func unknown(d *jsonscan.Decoder, k []byte, fields []string) bool {
	for _, f := range fields {
		if bytes.EqualFold(k, []byte(f)) {
			return false
		}
	}
	_, ok := d.Value()
	return ok
}

// raw copies the next value's JSON, as json.RawMessage does.
func raw(d *jsonscan.Decoder, out *json.RawMessage) bool {
	v, ok := d.Value()
	if ok {
		*out = append([]byte(nil), v...)
	}
	return ok
}

// str reads a string into a string field; null leaves it as it was.
func str(d *jsonscan.Decoder, out *string) bool {
	if d.Null() {
		return true
	}
	s, ok := d.String()
	if ok {
		*out = s
	}
	return ok
}

func strPtr(d *jsonscan.Decoder, out **string) bool {
	if d.Null() {
		*out = nil
		return true
	}
	s, ok := d.String()
	if ok {
		*out = &s
	}
	return ok
}

// boolean reads true or false; null leaves the field as it was.
func boolean(d *jsonscan.Decoder, out *bool) bool {
	if d.Null() {
		return true
	}
	v, ok := d.Bool()
	if ok {
		*out = v
	}
	return ok
}

// float reads a number; null leaves the field as it was, and one beyond
// float64 is an error, as in encoding/json.
func float(d *jsonscan.Decoder, out *float64) bool {
	if d.Null() {
		return true
	}
	n, ok := d.Number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return false
	}
	*out = f
	return true
}
