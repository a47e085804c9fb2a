package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// show prints m as protojson with -o json, otherwise what table writes
// (aligned columns through a tabwriter).
func (a *app) show(m proto.Message, table func(w io.Writer)) error {
	if a.output == "json" {
		return a.printJSON(m)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 8, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// printJSON prints m as protojson (the field names grpcurl prints),
// indented by encoding/json: protojson varies its spacing from build to
// build on purpose, and a script's diff should not.
func (a *app) printJSON(m proto.Message) error {
	data, err := protojson.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = a.stdout.Write(out.Bytes())
	return err
}

// row writes one tab-separated table row.
func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// field writes one "KEY:  value" line of a single resource's table.
func field(w io.Writer, key string, value string) {
	fmt.Fprintf(w, "%s:\t%s\n", key, value)
}

// ts is a timestamp for people: RFC 3339 in UTC, "-" when unset.
func ts(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// dur is a duration for people, "-" when unset.
func dur(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}

// enum drops an enum value's prefix ("STATE_ENABLED" -> "ENABLED").
func enum(v fmt.Stringer, prefix string) string {
	return strings.TrimPrefix(v.String(), prefix)
}

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// dash is s, or "-" when s is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// size is a byte count for people: exact, then in its largest binary
// unit ("536870912 (512Mi)", "25275990016 (23.5Gi)").
func size(n int64) string {
	s := strconv.FormatInt(n, 10)
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.bytes {
			v := strconv.FormatFloat(float64(n)/float64(u.bytes), 'f', 1, 64)
			return fmt.Sprintf("%s (%s%s)", s, strings.TrimSuffix(v, ".0"), u.suffix)
		}
	}
	return s
}

// isTerminal reports whether f is a character device: a terminal, for
// the progress line and for stdin. /dev/null is one too, which is right
// for both (nothing shown to nobody, nothing to read).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	info, err := file.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// progress is the one line on stderr that shows what a command waits for,
// redrawn in place, only when stderr is a terminal.
type progress struct {
	w     io.Writer
	on    bool
	start time.Time
	shown bool
}

func (a *app) progress() *progress {
	return &progress{w: a.stderr, on: isTerminal(a.stderr), start: time.Now()}
}

// show replaces the line with msg and the time waited so far.
func (p *progress) show(format string, args ...any) {
	if !p.on {
		return
	}
	fmt.Fprintf(p.w, "\r\033[K%s (%s)", fmt.Sprintf(format, args...), time.Since(p.start).Round(time.Second))
	p.shown = true
}

// clear removes the line.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}

// page holds --page-size and --page-token of a list command.
type page struct {
	size  int32
	token string
}

func (p *page) flags(fs *pflag.FlagSet) {
	fs.Int32Var(&p.size, "page-size", 0, "read one page of at most this many (default: every page)")
	fs.StringVar(&p.token, "page-token", "", "continue a listing from its next page token")
}

// list reads one page of --page-size, or every page from --page-token on
// when no size is given, through fetch; next is the token after what was
// read ("" at the end).
func list[T any](p page, fetch func(size int32, token string) ([]T, string, error)) (items []T, next string, err error) {
	if p.size > 0 {
		return fetch(p.size, p.token)
	}
	next = p.token
	for {
		got, n, err := fetch(1000, next)
		if err != nil {
			return nil, "", err
		}
		items = append(items, got...)
		if n == "" {
			return items, "", nil
		}
		next = n
	}
}

// more tells a person, on stderr, how to read the next page.
func (a *app) more(next string) {
	if next != "" && a.output != "json" {
		fmt.Fprintf(a.stderr, "more: --page-token %s\n", next)
	}
}
