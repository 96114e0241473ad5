package spec

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlBlocks names the block each of yaml.v3's "while parsing a ..."
// errors is about. For these the line in the error is that of the block's
// start (counted from 0, so the line above it in the file); for other
// errors with a context, such as an unclosed quote, it is the context's.
var yamlBlocks = map[string]string{
	"did not find expected '-' indicator": "list",
	"did not find expected key":           "mapping",
	"did not find expected ',' or ']'":    "[...] list",
	"did not find expected ',' or '}'":    "{...} mapping",
}

// utf8BOM may only open a YAML stream, so the line yamlErrorPos adds goes
// after it.
var utf8BOM = []byte("\xef\xbb\xbf")

// yamlIndentErrors are the errors a line's indentation causes: for these
// the column given is the line's first that is not a space. Others get
// column 1, since the line, not the column, is known.
var yamlIndentErrors = map[string]bool{
	"did not find expected '-' indicator":             true,
	"did not find expected key":                       true,
	"found a tab character that violates indentation": true,
	"mapping values are not allowed in this context":  true,
}

// yamlSearchLimit bounds the size of a file yamlErrorPos searches: each
// step parses a prefix, about 2·log2(lines) of them, so a 1 MiB spec took
// 2.5 s where one parse takes 0.16 s. Larger files keep yaml.v3's line.
const yamlSearchLimit = 256 << 10

// yamlErrorPos places err, the error yaml.v3 gave for data, and returns
// its message without yaml.v3's prefix.
//
// yaml.v3 reports the line of the block around a problem (its context
// mark), not the line of the problem, and does not expose the problem's
// mark: one list item of the quickstart indented a space too far was
// reported at `stages:`, forty lines above it. The problem lies on the
// last line of a short prefix of data that fails with the same error; a
// prefix that stops before it parses, or fails differently (it ends
// inside the block, and yaml.v3 then says so). A flow collection spanning
// lines is the exception: every prefix ending inside it fails alike, so
// its first line is reported.
func yamlErrorPos(data []byte, err error) (line, col int, msg string) {
	line, msg = splitYAMLError(err)
	if strings.Contains(msg, "UTF-8") || strings.Contains(msg, "Unicode") || msg == "control characters are not allowed" {
		// yaml.v3 gives the line after the character, or none, and no
		// column; the first one YAML refuses is the one it meant.
		if l, c, what, ok := unprintable(data); ok {
			return l, c, what
		}
	}
	if len(data) > yamlSearchLimit {
		return line, 1, msg
	}
	// Where the block starts on the first line, yaml.v3 reports the
	// problem's line instead, which moves with the prefix (and is 0, left
	// out, when that is the first line too). One line more in front keeps
	// every block off the first line.
	shift := func(b []byte) []byte {
		head := 0
		if bytes.HasPrefix(b, utf8BOM) {
			head = len(utf8BOM)
		}
		out := make([]byte, 0, len(b)+1)
		out = append(append(append(out, b[:head]...), '\n'), b[head:]...)
		return out
	}
	want := parseYAML(shift(data))
	if want == nil {
		return line, 1, msg
	}
	wantLine, wantMsg := splitYAMLError(want)
	if wantMsg != msg {
		return line, 1, msg // not data as yaml.v3 read it (UTF-16, say)
	}
	if wantLine > 0 {
		// The line is that of the block, or of the problem; either way
		// the problem is at or below the line before it in data (less
		// one, for scanner errors, which count from 1).
		line = wantLine - 1
	}
	lines := splitYAMLLines(data)
	if line > len(lines) {
		return line, 1, msg // yaml.v3 counted breaks splitYAMLLines did not
	}
	ends := make([]int, len(lines)+1)
	for i, l := range lines {
		ends[i+1] = ends[i] + len(l)
	}
	same := func(k int) bool {
		e := parseYAML(shift(data[:ends[k]]))
		return e != nil && e.Error() == want.Error()
	}
	// All of data fails so, by definition. Gallop then bisect rather than
	// try each line in turn, which is quadratic in the length of a spec
	// whose top-level mapping holds the problem; on the broken specs tried
	// (thousands of random edits of the examples) both found the same line.
	last := len(lines)
	lo := max(line, 1) - 1
	hi := min(lo+1, last)
	for step := 2; hi < last && !same(hi); step *= 2 {
		lo, hi = hi, min(hi+step, last)
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; same(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	col = 1
	if yamlIndentErrors[msg] {
		text := lines[hi-1]
		col = len(text) - len(bytes.TrimLeft(text, " ")) + 1
		if col > len(strings.TrimRight(string(text), "\r\n")) {
			col = 1 // a blank line: the problem is the end of the input
		}
	}
	if text := lines[hi-1]; msg == "found character that cannot start any token" && bytes.HasPrefix(bytes.TrimLeft(text, " "), []byte("\t")) {
		// yaml.v3 names no character; a tab in the indentation is the
		// usual one.
		msg += ": a tab indents this line; YAML indents with spaces"
	}
	if kind, ok := yamlBlocks[msg]; ok {
		// With the line added in front, wantLine counts from 1 in data.
		if wantLine > 0 && wantLine < hi {
			msg = fmt.Sprintf("%s (in the %s that starts at line %d)", msg, kind, wantLine)
		}
	}
	return hi, col, msg
}

// unprintable finds the first byte sequence of data that is not UTF-8 or
// is a character YAML does not allow (its c-printable set), and says
// which, at its line and column as an editor counts them: lines end at
// "\n", "\r\n" or "\r", columns count characters. (yaml.v3 also ends
// lines at U+0085, U+2028 and U+2029, so its lines below such a character
// are one more.) UTF-16, which yaml.v3 reads too, is left to yaml.v3.
func unprintable(data []byte) (line, col int, what string, ok bool) {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return 0, 0, "", false
	}
	line, col = 1, 1
	data = bytes.TrimPrefix(data, utf8BOM)
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return line, col, fmt.Sprintf("byte 0x%02x is not UTF-8: a spec is UTF-8 text (was it saved as Latin-1?)", data[i]), true
		case r == '\n', r == '\r' && (i+1 >= len(data) || data[i+1] != '\n'):
			line, col = line+1, 1
		case r == '\t', r == '\r', r >= 0x20 && r <= 0x7e, r == 0x85, r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000:
			col++
		case r <= 0xff:
			return line, col, fmt.Sprintf("control character %U is not allowed (in a double-quoted string write it as \\x%02x)", r, r), true
		default:
			return line, col, fmt.Sprintf("character %U is not allowed (in a double-quoted string write it as \\u%04x)", r, r), true
		}
		i += n
	}
	return 0, 0, "", false
}

// splitYAMLLines splits data after each line break as yaml.v3 counts
// them: "\r\n", a lone "\r" or "\n". (yaml.v3 also breaks at U+0085,
// U+2028 and U+2029, which a spec has no reason to hold; where it does,
// the line yaml.v3 gave may lie past the last line found here, and is then
// kept.)
func splitYAMLLines(data []byte) [][]byte {
	var lines [][]byte
	start := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '\r':
			if i+1 < len(data) && data[i+1] == '\n' {
				i++
			}
		case '\n':
		default:
			continue
		}
		lines = append(lines, data[start:i+1])
		start = i + 1
	}
	if start < len(data) {
		lines = append(lines, data[start:])
	}
	if len(lines) == 0 {
		lines = append(lines, data)
	}
	return lines
}

// splitYAMLError splits a yaml.v3 error into the line it names (0 if none)
// and its message.
func splitYAMLError(err error) (int, string) {
	s := err.Error()
	if m := yamlLineRe.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n, m[2]
	}
	return 0, strings.TrimPrefix(s, "yaml: ")
}

func parseYAML(data []byte) error {
	var n yaml.Node
	return yaml.Unmarshal(data, &n)
}
