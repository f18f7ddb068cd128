package main

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A series is one colour of a grouped bar chart: a value per category, and
// optionally a min and max per category drawn as a whisker. NaN: no bar
// (failed or not measured).
type series struct {
	name     string
	vals     []float64
	lo, hi   []float64
	hatched  bool // drawn lighter: figures from elsewhere, not measured here
	colorIdx int
}

// chart is a grouped bar chart; with log set, the value axis is
// logarithmic and the bars start at the bottom of the axis.
type chart struct {
	title, ylabel string
	categories    []string
	series        []series
	log           bool
	horizontalRef float64 // draw a dashed line at this value (e.g. a target), 0: none
	refLabel      string
}

// bars draws one series of a grouped bar chart. It does its own drawing
// (rather than plotter.BarChart) so that bars can start at the bottom of a
// logarithmic axis.
type bars struct {
	s      series
	offset vg.Length
	width  vg.Length
	color  color.Color
}

func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	bottom := trY(p.Y.Min)
	for i, v := range b.s.vals {
		if math.IsNaN(v) || v <= 0 && p.Y.Scale == (plot.LogScale{}) {
			continue
		}
		x := trX(float64(i)) + b.offset - b.width/2
		top := trY(v)
		pts := []vg.Point{{X: x, Y: bottom}, {X: x, Y: top}, {X: x + b.width, Y: top}, {X: x + b.width, Y: bottom}}
		c.FillPolygon(b.color, c.ClipPolygonY(pts))
		if b.s.lo != nil && b.s.hi != nil && b.s.hi[i] > b.s.lo[i] {
			mid := x + b.width/2
			ls := draw.LineStyle{Color: color.Black, Width: vg.Points(0.7)}
			lo, hi := trY(b.s.lo[i]), trY(b.s.hi[i])
			c.StrokeLines(ls, c.ClipLinesY([]vg.Point{{X: mid, Y: lo}, {X: mid, Y: hi}})...)
			c.StrokeLines(ls, c.ClipLinesY([]vg.Point{{X: mid - b.width/4, Y: hi}, {X: mid + b.width/4, Y: hi}})...)
			c.StrokeLines(ls, c.ClipLinesY([]vg.Point{{X: mid - b.width/4, Y: lo}, {X: mid + b.width/4, Y: lo}})...)
		}
	}
}

func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = -0.5, float64(len(b.s.vals))-0.5
	ymin, ymax = math.Inf(1), math.Inf(-1)
	for i, v := range b.s.vals {
		if math.IsNaN(v) || v <= 0 {
			continue
		}
		ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
		if b.s.hi != nil && !math.IsNaN(b.s.hi[i]) {
			ymax = math.Max(ymax, b.s.hi[i])
			ymin = math.Min(ymin, b.s.lo[i])
		}
	}
	if math.IsInf(ymin, 1) {
		ymin, ymax = 1, 1
	}
	return
}

// Thumbnail for the legend.
func (b *bars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Min.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.color, c.ClipPolygonY(pts))
}

func (ch chart) save(path string, w, h vg.Length) error {
	p := plot.New()
	p.Title.Text = ch.title
	p.Y.Label.Text = ch.ylabel
	p.NominalX(ch.categories...)
	p.Legend.Top = true
	p.Legend.Left = ch.log // log charts rise to the right
	if len(ch.categories) > 5 {
		p.X.Tick.Label.Rotation = math.Pi / 7
		p.X.Tick.Label.XAlign = draw.XRight
		p.X.Tick.Label.YAlign = draw.YCenter
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	n := len(ch.series)
	groupW := vg.Points(float64(w) / float64(len(ch.categories)+1) * 0.7)
	barW := groupW / vg.Length(n)
	var ymin, ymax = math.Inf(1), math.Inf(-1)
	for i, s := range ch.series {
		c := plotutil.Color(s.colorIdx)
		if s.hatched {
			r, g, bl, _ := c.RGBA()
			c = color.RGBA{uint8((r>>8 + 2*255) / 3), uint8((g>>8 + 2*255) / 3), uint8((bl>>8 + 2*255) / 3), 255}
		}
		b := &bars{s: s, offset: barW * (vg.Length(i) - vg.Length(n-1)/2), width: barW * 0.9, color: c}
		p.Add(b)
		p.Legend.Add(s.name, b)
		_, _, lo, hi := b.DataRange()
		ymin, ymax = math.Min(ymin, lo), math.Max(ymax, hi)
	}
	if ch.horizontalRef > 0 {
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: ch.horizontalRef}, {X: float64(len(ch.categories)) - 0.5, Y: ch.horizontalRef}})
		if err == nil {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			l.Color = color.Gray{Y: 80}
			p.Add(l)
			if ch.refLabel != "" {
				p.Legend.Add(ch.refLabel, l)
			}
		}
		ymin, ymax = math.Min(ymin, ch.horizontalRef), math.Max(ymax, ch.horizontalRef)
	}
	if ch.log {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Pow(10, math.Floor(math.Log10(ymin)))
		p.Y.Max = math.Pow(10, math.Ceil(math.Log10(ymax*1.5)))
	} else {
		p.Y.Min = 0
		p.Y.Tick.Marker = niceTicks{}
		p.Y.Max = ymax * 1.25 // room for the legend
	}
	return p.Save(w, h, path)
}

// niceTicks labels every line of a linear axis at 1, 2 or 5 × 10^k steps.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if hi <= lo {
		return nil
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 6, 64)})
	}
	return ts
}
