package values

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends v as -json writes it, the bytes encoding/json writes
// for v.JSON(), to b. It builds none of v.JSON()'s maps and slices and
// makes no second pass over a struct's fields, which made a large value
// (a *bbolt.Bucket) cost the tracer's reader tens of microseconds.
func AppendJSON(b []byte, v Value) ([]byte, error) {
	var err error
	switch v := v.(type) {
	case object:
		b = append(b, '{')
		for i, f := range v.flat() {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = AppendJSON(append(AppendJSONString(b, JSONText(f.name)), ':'), f.value); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case pointer:
		return AppendJSON(b, v.to)
	case list:
		if len(v.elems) == 0 && v.len > 0 {
			return AppendJSONString(b, v.String()), nil
		}
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = AppendJSON(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case mapValue:
		if uint64(len(v.entries)) < v.len {
			return AppendJSONString(b, v.String()), nil
		}
		// As encoding/json writes a map[string]any: a key's last entry,
		// the keys sorted.
		elems := make(map[string]Value, len(v.entries))
		for _, e := range v.entries {
			elems[e.jsonKey()] = e.elem
		}
		keys := make([]string, 0, len(elems))
		for k := range elems {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = AppendJSON(append(AppendJSONString(b, k), ':'), elems[k]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case text:
		return AppendJSONString(b, JSONText(string(v))), nil
	case quotedText:
		return AppendJSONString(b, JSONText(string(v))), nil
	case message:
		return AppendJSONString(b, string(v)), nil
	case unknown:
		return AppendJSONString(b, string(v)), nil
	case nilSlice, null, nilMap:
		return append(b, "null"...), nil
	case scalar:
		return AppendJSONData(b, v.json)
	case integer:
		return strconv.AppendInt(b, int64(v), 10), nil
	case duration:
		return strconv.AppendInt(b, int64(v), 10), nil
	case natural:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case boolean:
		return strconv.AppendBool(b, bool(v)), nil
	}
	return marshal(b, v.JSON())
}

// AppendJSONData appends data, a value's JSON() or what else -json
// writes of an argument, as encoding/json writes it: the kinds most
// arguments are by hand, a Value by AppendJSON.
func AppendJSONData(b []byte, data any) ([]byte, error) {
	switch v := data.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return AppendJSONString(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case Value:
		return AppendJSON(b, v)
	}
	return marshal(b, data)
}

// JSONData is what v.JSON() is, as AppendJSONData and encoding/json
// write it, but for a struct, slice, array or map, or a pointer to one,
// it is v itself, which writes the same (AppendJSON, MarshalJSON) when
// asked: a consumer that shows such a value by its text (the exporter's
// attributes) then builds no tree of it, a third of the allocations of
// an event's values.
func JSONData(v Value) any {
	if composite(v) {
		return v
	}
	return v.JSON()
}

func composite(v Value) bool {
	switch v := v.(type) {
	case object, list, mapValue:
		return true
	case pointer:
		return composite(v.to)
	}
	return false
}

// MarshalJSON writes the elements as JSON() has them (AppendJSON).
func (l list) MarshalJSON() ([]byte, error) { return AppendJSON(nil, l) }

// MarshalJSON writes the entries as JSON() has them (AppendJSON).
func (m mapValue) MarshalJSON() ([]byte, error) { return AppendJSON(nil, m) }

// MarshalJSON writes what the pointer points to (AppendJSON).
func (p pointer) MarshalJSON() ([]byte, error) { return AppendJSON(nil, p) }

func marshal(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, j...), nil
}

// AppendJSONString appends s quoted as encoding/json quotes it: <, > and
// & escaped for HTML, \b, \f, \n, \r and \t short, other control bytes
// as \u00XX, invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
