package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What the CLI prints of the server's answers holds text that tenants
// chose (batch and job names, attributes, messages, errors naming them).
// A name with a terminal escape sequence could rewrite the screen of
// whoever lists it, and a newline or tab could forge a row of a table, so
// every value goes through escape on its way to a table or a message:
// safef and safeln are fmt.Fprintf and fmt.Fprintln with their values
// escaped (the format's own tabs and newlines stay). A job's log, which
// `drover job logs` copies as the job wrote it, is not a table or a
// message and is not escaped.

// escape writes control characters, invalid UTF-8 and the Unicode
// controls that reorder text (bidi overrides) as Go escapes: "\x1b[2J"
// prints as `\x1b[2J`, a newline as `\n`.
func escape(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafeRune(r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// escapeLines is escape line by line: the line breaks stay.
func escapeLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escape(l)
	}
	return strings.Join(lines, "\n")
}

// unsafeRune reports whether r controls a terminal or the direction of
// text rather than being shown (invalid UTF-8 decodes to RuneError).
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == utf8.RuneError:
		return true
	}
	return false
}

// escapeArgs escapes the text in a print's values: strings, errors,
// Stringers and string slices; numbers and the rest print as they are.
func escapeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = escape(v)
		case []string:
			c := make([]string, len(v))
			for k, s := range v {
				c[k] = escape(s)
			}
			out[i] = c
		case error:
			out[i] = errors.New(escape(v.Error()))
		case fmt.Stringer:
			out[i] = escape(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

// safef is fmt.Fprintf with its values escaped.
func safef(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, escapeArgs(args)...)
}

// safeln is fmt.Fprintln with its values escaped.
func safeln(w io.Writer, args ...any) {
	fmt.Fprintln(w, escapeArgs(args)...)
}

// rowf formats a table row (cells apart by tabs) with its values escaped,
// for a caller that prints it with fmt.Fprintln.
func rowf(format string, args ...any) string {
	return fmt.Sprintf(format, escapeArgs(args)...)
}
