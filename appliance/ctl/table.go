package ctl

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// table is what a verb writes its human output to: lines with tabs
// between cells, as for text/tabwriter. Flush aligns each block of
// consecutive tabbed lines (two spaces between columns) and fits it to
// the terminal's width:
//
//   - a block after Columns drops the columns marked droppable, least
//     important first, then truncates the shrinkable ones with "…" until
//     its widest row fits;
//   - any other block (key/value lines) wraps its last cell at spaces.
//
// With width 0 (output not a terminal) everything is printed in full, so
// scripts reading a pipe lose nothing; --json never comes here.
type table struct {
	out   io.Writer
	width int
	part  []byte // a line not finished yet
	lines []tline
	spec  *[]col
}

type tline struct {
	cells []string // one cell: a plain line, printed as it is
	spec  *[]col
}

// col says how a column of a Columns block may be shortened.
type col struct {
	drop    int  // > 0: may be left out when too wide; 1 goes first, then 2, …
	min     int  // > 0: may be truncated with "…" down to this many characters
	keepEnd bool // truncate the start ("…ctl:/etc/branch.json"), for paths
}

// Columns makes the tabbed lines written from now on one table whose
// columns may be shortened as cols say (missing ones: never).
func (t *table) Columns(cols ...col) { t.spec = &cols }

// KeyValue makes the tabbed lines written from now on key/value lines
// again: aligned, last cell wrapped.
func (t *table) KeyValue() { t.spec = nil }

func (t *table) Write(p []byte) (int, error) {
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		t.lines = append(t.lines, tline{cells: strings.Split(string(t.part[:i]), "\t"), spec: t.spec})
		t.part = t.part[i+1:]
	}
}

// Flush prints everything written.
func (t *table) Flush() error {
	if len(t.part) > 0 {
		t.Write([]byte("\n"))
	}
	var b strings.Builder
	for i := 0; i < len(t.lines); {
		l := t.lines[i]
		if len(l.cells) == 1 {
			b.WriteString(l.cells[0])
			b.WriteByte('\n')
			i++
			continue
		}
		j := i + 1
		for j < len(t.lines) && len(t.lines[j].cells) > 1 && t.lines[j].spec == l.spec {
			j++
		}
		if l.spec == nil {
			t.keyValue(&b, t.lines[i:j])
		} else {
			t.columns(&b, t.lines[i:j], *l.spec)
		}
		i = j
	}
	t.lines = nil
	_, err := io.WriteString(t.out, b.String())
	return err
}

func runes(s string) int { return utf8.RuneCountInString(s) }

// keyValue aligns every cell but the last and wraps the last one.
func (t *table) keyValue(b *strings.Builder, rows []tline) {
	var widths []int
	for _, r := range rows {
		for i, c := range r.cells[:len(r.cells)-1] {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], runes(c))
		}
	}
	for _, r := range rows {
		indent := 0
		for i, c := range r.cells[:len(r.cells)-1] {
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-runes(c)+2))
			indent += widths[i] + 2
		}
		last := r.cells[len(r.cells)-1]
		// Wrap only where something readable is left beside the keys.
		if t.width == 0 || t.width-indent < 20 || runes(last) <= t.width-indent {
			b.WriteString(last)
			b.WriteByte('\n')
			continue
		}
		for k, l := range wrap(last, t.width-indent) {
			if k > 0 {
				b.WriteString(strings.Repeat(" ", indent))
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
}

// columns prints a block of a table with column rules, shortened to the
// width.
func (t *table) columns(b *strings.Builder, rows []tline, spec []col) {
	n := 0
	for _, r := range rows {
		n = max(n, len(r.cells))
	}
	cols := make([]col, n)
	copy(cols, spec)
	widths := make([]int, n)
	for _, r := range rows {
		for i, c := range r.cells {
			widths[i] = max(widths[i], runes(c))
		}
	}
	shown := make([]bool, n)
	for i := range shown {
		shown[i] = true
	}
	// total is the width of the shown columns, as wide as they are or as
	// narrow as they may become.
	total := func(shrunk bool) int {
		sum, k := 0, 0
		for i, w := range widths {
			if shown[i] {
				if shrunk && cols[i].min > 0 {
					w = min(w, cols[i].min)
				}
				sum += w
				k++
			}
		}
		return sum + 2*max(k-1, 0)
	}
	if t.width > 0 {
		// Leave out the least important columns while cutting values
		// alone cannot make the rows fit ...
		for total(true) > t.width {
			worst := -1
			for i, c := range cols {
				if shown[i] && c.drop > 0 && (worst < 0 || c.drop < cols[worst].drop) {
					worst = i
				}
			}
			if worst < 0 {
				break
			}
			shown[worst] = false
		}
		// ... then take a character at a time from the widest column
		// that may still give one.
		for over := total(false) - t.width; over > 0; over-- {
			widest := -1
			for i, c := range cols {
				if shown[i] && c.min > 0 && widths[i] > c.min && (widest < 0 || widths[i] > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
		}
	}
	last := -1
	for i := range shown {
		if shown[i] {
			last = i
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i := range n {
			if !shown[i] {
				continue
			}
			c := ""
			if i < len(r.cells) {
				c = truncate(r.cells[i], widths[i], cols[i].keepEnd)
			}
			line.WriteString(c)
			if i != last {
				line.WriteString(strings.Repeat(" ", widths[i]-runes(c)+2))
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
}

// truncate shortens s to w characters, the last (or with keepEnd the
// first) of them "…".
func truncate(s string, w int, keepEnd bool) string {
	n := runes(s)
	if n <= w {
		return s
	}
	if w < 1 {
		return ""
	}
	r := []rune(s)
	if keepEnd {
		return "…" + string(r[n-w+1:])
	}
	return string(r[:w-1]) + "…"
}

// wrap breaks s at spaces into lines of at most w characters; a longer
// word gets a line of its own, cut where it must be.
func wrap(s string, w int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		for runes(word) > w {
			if line != "" {
				out = append(out, line)
				line = ""
			}
			r := []rune(word)
			out = append(out, string(r[:w]))
			word = string(r[w:])
		}
		switch {
		case line == "":
			line = word
		case runes(line)+1+runes(word) <= w:
			line += " " + word
		default:
			out = append(out, line)
			line = word
		}
	}
	if line != "" || len(out) == 0 {
		out = append(out, line)
	}
	return out
}

// termWidth is the width tables are fitted to on w: 0 (no limit) unless
// w is a terminal; then the terminal's columns, else $COLUMNS, else 80.
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return 0
	}
	if n := winsizeCols(f); n > 0 {
		return n
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return 80
}
