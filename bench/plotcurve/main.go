// Command plotcurve draws the informer benchmark's cost curve from its
// RESULT lines: a PNG with initial sync time and retained heap per object
// against the number of objects, for kloop, client-go and the bare stream
// (and kloop's encoded cache and transform where measured), and, with
// -table, the same figures as a Markdown table.
//
// It reads the lines of `go run ./cmd/informer -n 1000,10000,100000`
// (names ending in -n<size>), from the files given or standard input; a
// figure given by several runs is their median. Drawing uses the standard
// library's image packages and a small bitmap font of its own.
//
// Run with: make bench-plot, or cd bench && go run ./plotcurve -png results/informer-curve.png -table results/informer-curve.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// result is one RESULT line of the curve.
type result struct {
	name               string // without the -n<size> suffix
	n                  int
	kloop, peer, ratio float64
}

var resultLine = regexp.MustCompile(`^RESULT (\S+)-n(\d+) kloop=(\S+) peer=(\S+) ratio=(\S+) `)

func parse(r io.Reader) ([]result, error) {
	var out []result
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := resultLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, err1 := strconv.Atoi(m[2])
		k, err2 := strconv.ParseFloat(m[3], 64)
		p, err3 := strconv.ParseFloat(m[4], 64)
		ratio, err4 := strconv.ParseFloat(m[5], 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
			return nil, fmt.Errorf("malformed line %q", sc.Text())
		}
		out = append(out, result{name: m[1], n: n, kloop: k, peer: p, ratio: ratio})
	}
	return out, sc.Err()
}

// figures holds the median of every figure over the runs:
// figures[name][n] = (kloop, peer), and ratios the per-run ratios.
type figures map[string]map[int][2]float64

type ratios map[string]map[int][]float64

func collect(rs []result) (figures, ratios) {
	all := map[string]map[int][][2]float64{}
	rats := ratios{}
	for _, r := range rs {
		if all[r.name] == nil {
			all[r.name] = map[int][][2]float64{}
			rats[r.name] = map[int][]float64{}
		}
		all[r.name][r.n] = append(all[r.name][r.n], [2]float64{r.kloop, r.peer})
		rats[r.name][r.n] = append(rats[r.name][r.n], r.ratio)
	}
	f := figures{}
	for name, byN := range all {
		f[name] = map[int][2]float64{}
		for n, vs := range byN {
			f[name][n] = [2]float64{median(column(vs, 0)), median(column(vs, 1))}
		}
	}
	return f, rats
}

func column(vs [][2]float64, i int) []float64 {
	xs := make([]float64, len(vs))
	for j, v := range vs {
		xs[j] = v[i]
	}
	return xs
}

func median(xs []float64) float64 {
	xs = slices.Sorted(slices.Values(xs))
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// series is one line of a panel: the value of side (0 kloop, 1 peer) of
// figure name at each size.
type series struct {
	label string
	name  string
	side  int
	color color.RGBA
}

var (
	kloopColor     = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	clientGoColor  = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	wireColor      = color.RGBA{0x55, 0x55, 0x55, 0xff}
	encodedColor   = color.RGBA{0x2c, 0xa0, 0x2c, 0xff}
	transformColor = color.RGBA{0xff, 0x7f, 0x0e, 0xff}
	metadataColor  = color.RGBA{0x94, 0x67, 0xbd, 0xff}
)

var (
	syncSeries = []series{
		{"kloop", "informer-sync-seconds", 0, kloopColor},
		{"client-go", "informer-sync-seconds", 1, clientGoColor},
		{"bare stream", "informer-sync-vs-wire", 1, wireColor},
	}
	bytesSeries = []series{
		{"kloop", "informer-bytes-per-object", 0, kloopColor},
		{"client-go", "informer-bytes-per-object", 1, clientGoColor},
		{"kloop transform", "informer-transform-bytes-per-object", 0, transformColor},
		{"kloop encoded", "informer-encoded-bytes-per-object", 0, encodedColor},
		{"kloop metadata", "informer-metadata-bytes-per-object", 0, metadataColor},
	}
)

func main() {
	out := flag.String("png", "", "write the plot to this PNG file")
	table := flag.Bool("table", false, "print the figures as a Markdown table")
	flag.Parse()
	var rs []result
	if flag.NArg() == 0 {
		r, err := parse(os.Stdin)
		if err != nil {
			fail(err)
		}
		rs = r
	}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fail(err)
		}
		r, err := parse(f)
		f.Close()
		if err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
		rs = append(rs, r...)
	}
	if len(rs) == 0 {
		fail(fmt.Errorf("no RESULT lines of a curve (names ending in -n<size>)"))
	}
	figs, rats := collect(rs)
	if *table {
		printTable(os.Stdout, figs, rats)
	}
	if *out != "" {
		img := draw(figs)
		f, err := os.Create(*out)
		if err != nil {
			fail(err)
		}
		if err := png.Encode(f, img); err != nil {
			f.Close()
			fail(err)
		}
		if err := f.Close(); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "plotcurve:", err)
	os.Exit(1)
}

func sizes(figs figures) []int {
	var ns []int
	for _, byN := range figs {
		for n := range byN {
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
		}
	}
	slices.Sort(ns)
	return ns
}

// printTable prints the medians of the figures and, for each ratio, the
// median of the runs' ratios with their range (the ratio within a run is
// the figure that counts).
func printTable(w io.Writer, figs figures, rats ratios) {
	get := func(name string, n, side int) string {
		v, ok := figs[name][n]
		if !ok {
			return "–"
		}
		if name == "informer-sync-seconds" || name == "informer-sync-vs-wire" {
			return strconv.FormatFloat(v[side], 'f', 3, 64)
		}
		return strconv.FormatFloat(v[side], 'f', 0, 64)
	}
	ratio := func(name string, n int) string {
		rs := rats[name][n]
		if len(rs) == 0 {
			return "–"
		}
		s := strconv.FormatFloat(median(rs), 'f', 2, 64)
		if len(rs) > 1 {
			s += fmt.Sprintf(" (%.2f–%.2f)", slices.Min(rs), slices.Max(rs))
		}
		return s
	}
	fmt.Fprintln(w, "| objects | sync kloop (s) | sync client-go (s) | bare stream (s) | kloop / stream | kloop / client-go | B/object kloop | B/object client-go | kloop / client-go | encoded | transform |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range sizes(figs) {
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", n,
			get("informer-sync-seconds", n, 0), get("informer-sync-seconds", n, 1), get("informer-sync-vs-wire", n, 1),
			ratio("informer-sync-vs-wire", n), ratio("informer-sync-seconds", n),
			get("informer-bytes-per-object", n, 0), get("informer-bytes-per-object", n, 1), ratio("informer-bytes-per-object", n),
			get("informer-encoded-bytes-per-object", n, 0), get("informer-transform-bytes-per-object", n, 0))
	}
}

const (
	width, height = 1300, 640
	panelW        = 540
	top, bottom   = 70, 470 // plot area rows
	scale         = 2       // text scale
)

var (
	white = color.RGBA{0xff, 0xff, 0xff, 0xff}
	black = color.RGBA{0, 0, 0, 0xff}
	grey  = color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
)

func draw(figs figures) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fillRect(img, img.Bounds(), white)
	ns := sizes(figs)
	drawPanel(img, 90, "initial sync, seconds (log)", ns, figs, syncSeries, true)
	drawPanel(img, 90+panelW+110, "retained heap per object, bytes", ns, figs, bytesSeries, false)
	return img
}

// drawPanel draws one panel with its left edge at x0: objects on a log
// axis, values on a log (logY) or linear axis from 0.
func drawPanel(img *image.RGBA, x0 int, title string, ns []int, figs figures, ss []series, logY bool) {
	x1 := x0 + panelW
	drawText(img, x0, 20, scale, title, black)
	// The value range over every series that has data.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, n := range ns {
			if v, ok := figs[s.name][n]; ok {
				lo, hi = math.Min(lo, v[s.side]), math.Max(hi, v[s.side])
			}
		}
	}
	if math.IsInf(lo, 0) {
		drawText(img, x0, top+20, scale, "no data", black)
		return
	}
	var yOf func(float64) int
	var ticks []float64
	if logY {
		a, b := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if a == b {
			b++
		}
		yOf = func(v float64) int {
			return bottom - int(float64(bottom-top)*(math.Log10(v)-a)/(b-a))
		}
		for e := a; e <= b; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		step := niceStep(hi / 5)
		b := math.Ceil(hi/step) * step
		yOf = func(v float64) int { return bottom - int(float64(bottom-top)*v/b) }
		for v := 0.0; v <= b+step/2; v += step {
			ticks = append(ticks, v)
		}
	}
	xa, xb := math.Log10(float64(ns[0]))-0.15, math.Log10(float64(ns[len(ns)-1]))+0.15
	xOf := func(n int) int {
		return x0 + int(float64(panelW)*(math.Log10(float64(n))-xa)/(xb-xa))
	}
	for _, t := range ticks {
		y := yOf(t)
		hline(img, x0, x1, y, grey)
		label := strconv.FormatFloat(t, 'g', 4, 64)
		drawText(img, x0-8-textWidth(label, scale), y-7, scale, label, black)
	}
	for _, n := range ns {
		x := xOf(n)
		vline(img, x, top, bottom, grey)
		label := strconv.Itoa(n)
		drawText(img, x-textWidth(label, scale)/2, bottom+10, scale, label, black)
	}
	drawText(img, x0+panelW/2-textWidth("objects", scale)/2, bottom+34, scale, "objects", black)
	hline(img, x0, x1, bottom, black)
	vline(img, x0, top, bottom, black)

	legendX, legendY := x0, bottom+62
	for _, s := range ss {
		var pts []image.Point
		for _, n := range ns {
			if v, ok := figs[s.name][n]; ok && (!logY || v[s.side] > 0) {
				pts = append(pts, image.Pt(xOf(n), yOf(v[s.side])))
			}
		}
		if len(pts) == 0 {
			continue
		}
		for i := 1; i < len(pts); i++ {
			line(img, pts[i-1], pts[i], s.color)
		}
		for _, p := range pts {
			fillRect(img, image.Rect(p.X-4, p.Y-4, p.X+5, p.Y+5), s.color)
		}
		if legendX+28+textWidth(s.label, scale) > x1 {
			legendX, legendY = x0, legendY+22
		}
		fillRect(img, image.Rect(legendX, legendY+3, legendX+20, legendY+9), s.color)
		drawText(img, legendX+28, legendY, scale, s.label, black)
		legendX += 28 + textWidth(s.label, scale) + 24
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.Color) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.Set(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color) {
	fillRect(img, image.Rect(x0, y, x1+1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	fillRect(img, image.Rect(x, y0, x+1, y1+1), c)
}

// line draws a segment three pixels wide.
func line(img *image.RGBA, a, b image.Point, c color.Color) {
	steps := max(abs(b.X-a.X), abs(b.Y-a.Y), 1)
	for i := 0; i <= steps; i++ {
		x := a.X + (b.X-a.X)*i/steps
		y := a.Y + (b.Y-a.Y)*i/steps
		fillRect(img, image.Rect(x-1, y-1, x+2, y+2), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
