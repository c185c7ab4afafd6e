package proxy

// CacheGroupsHeader is RFC 9875's response header: the groups an answer
// belongs to, a Structured Fields List of Strings (RFC 8941). Its groups
// are the answer's tags, beside those of the tags header; it stays in the
// answer, for the caches after the proxy.
const CacheGroupsHeader = "cache-groups"

// parseStringList reads v, a Structured Fields List whose members are
// Strings (their parameters ignored), and reports false for a value that
// is none: not a List, or a member of another type. A header that names
// groups the proxy cannot read makes an answer it may not keep, as a purge
// by those groups would miss it.
func parseStringList(v string) ([]string, bool) {
	p := sfParser{s: v}
	p.skip(" ")
	var out []string
	for p.i < len(p.s) {
		str, ok := p.str()
		if !ok || !p.params() {
			return nil, false
		}
		if str != "" {
			out = append(out, str)
		}
		p.skip(" \t")
		if p.i == len(p.s) {
			break
		}
		if p.s[p.i] != ',' {
			return nil, false
		}
		p.i++
		p.skip(" \t")
		if p.i == len(p.s) {
			return nil, false // a trailing comma
		}
	}
	return out, true
}

// sfParser reads a Structured Field value from its position i.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) skip(chars string) {
	for p.i < len(p.s) && (p.s[p.i] == chars[0] || len(chars) > 1 && p.s[p.i] == chars[1]) {
		p.i++
	}
}

func (p *sfParser) peek(c byte) bool { return p.i < len(p.s) && p.s[p.i] == c }

// str reads an sf-string: printable ASCII in quotes, \" and \\ escaped.
func (p *sfParser) str() (string, bool) {
	if !p.peek('"') {
		return "", false
	}
	p.i++
	var b []byte
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return string(b), true
		case c == '\\':
			if p.i == len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return "", false
			}
			b = append(b, p.s[p.i])
			p.i++
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b = append(b, c)
		}
	}
	return "", false
}

// params skips a member's parameters: ;key or ;key=bare-item.
func (p *sfParser) params() bool {
	for p.peek(';') {
		p.i++
		p.skip(" ")
		if !p.key() {
			return false
		}
		if p.peek('=') {
			p.i++
			if !p.bareItem() {
				return false
			}
		}
	}
	return true
}

// key reads a key: a lower-case letter or *, then lower-case letters,
// digits, _, -, . or *.
func (p *sfParser) key() bool {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		first := 'a' <= c && c <= 'z' || c == '*'
		if !first && (p.i == start || !('0' <= c && c <= '9' || c == '_' || c == '-' || c == '.')) {
			break
		}
		p.i++
	}
	return p.i > start
}

// bareItem skips a parameter's value: a string, a byte sequence, a
// boolean, a number or a token.
func (p *sfParser) bareItem() bool {
	if p.i == len(p.s) {
		return false
	}
	switch c := p.s[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == ':':
		end := p.i + 1
		for end < len(p.s) && p.s[end] != ':' {
			end++
		}
		if end == len(p.s) {
			return false
		}
		p.i = end + 1
		return true
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return true
		}
		return false
	case c == '-' || '0' <= c && c <= '9':
		p.i++
		for p.i < len(p.s) && ('0' <= p.s[p.i] && p.s[p.i] <= '9' || p.s[p.i] == '.') {
			p.i++
		}
		return p.s[p.i-1] != '-' && p.s[p.i-1] != '.'
	case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '*':
		p.i++
		for p.i < len(p.s) && p.s[p.i] > ' ' && p.s[p.i] < 0x7f && !isSFDelimiter(p.s[p.i]) {
			p.i++
		}
		return true
	}
	return false
}

// isSFDelimiter reports whether c ends a token.
func isSFDelimiter(c byte) bool {
	switch c {
	case '"', '(', ')', ',', ';', '=', '?', '@', '[', '\\', ']', '{', '}':
		return true
	}
	return false
}
