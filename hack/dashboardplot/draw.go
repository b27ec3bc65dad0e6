package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	xfont "golang.org/x/image/font"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/quotascale/quotascale/deploy/dashboard"
)

// The picture follows Grafana's grid: 24 columns, panel heights in grid
// rows.
const (
	gridColumns            = 24
	columnWidth  vg.Length = 40
	gridRow      vg.Length = 22
	panelMargin  vg.Length = 3
	legendLine   vg.Length = 9
	legendSwatch vg.Length = 12
	// legendShare is the most of a panel's height its legend may take.
	legendShare = 0.4
)

// palette is Grafana's classic series palette.
var palette = []color.RGBA{
	{0x7e, 0xb2, 0x6d, 0xff}, {0xea, 0xb8, 0x39, 0xff}, {0x6e, 0xd0, 0xe0, 0xff}, {0xef, 0x84, 0x3c, 0xff},
	{0xe2, 0x4d, 0x42, 0xff}, {0x1f, 0x78, 0xc1, 0xff}, {0xba, 0x43, 0xa9, 0xff}, {0x70, 0x5d, 0xa0, 0xff},
	{0x50, 0x86, 0x42, 0xff}, {0xcc, 0xa3, 0x00, 0xff}, {0x44, 0x7e, 0xbc, 0xff}, {0xc1, 0x5c, 0x17, 0xff},
	{0x89, 0x0f, 0x02, 0xff}, {0x0a, 0x43, 0x7c, 0xff}, {0x6d, 0x1f, 0x62, 0xff}, {0x58, 0x44, 0x77, 0xff},
}

var (
	sans      = font.Font{Typeface: "Liberation", Variant: "Sans"}
	textColor = color.Gray{Y: 0x30}
	frame     = color.Gray{Y: 0xd0}
)

func textStyle(size vg.Length, bold bool) draw.TextStyle {
	f := sans
	f.Size = size
	if bold {
		f.Weight = xfont.WeightBold
	}
	return draw.TextStyle{Color: textColor, Font: f, Handler: plot.DefaultTextHandler}
}

// drawDashboard draws every row title and panel of d at its place on the
// grid, the time series panels from data, and writes one SVG.
func drawDashboard(w io.Writer, d dashboard.Dashboard, data []panelData) error {
	byTitle := map[string]panelData{}
	for _, p := range data {
		byTitle[p.Panel.Title] = p
	}
	rows := 0
	for _, p := range d.AllPanels() {
		rows = max(rows, p.GridPos.Y+p.GridPos.H)
	}
	width, height := gridColumns*columnWidth, vg.Length(rows)*gridRow
	c := vgsvg.NewWith(vgsvg.UseWH(width, height), vgsvg.EmbedFonts(false))
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	for _, p := range d.AllPanels() {
		g := p.GridPos
		area := draw.Canvas{Canvas: c, Rectangle: vg.Rectangle{
			Min: vg.Point{X: vg.Length(g.X) * columnWidth, Y: height - vg.Length(g.Y+g.H)*gridRow},
			Max: vg.Point{X: vg.Length(g.X+g.W) * columnWidth, Y: height - vg.Length(g.Y)*gridRow},
		}}
		if p.Type == "row" {
			sty := textStyle(12, true)
			sty.YAlign = draw.YCenter
			area.FillText(sty, vg.Point{X: area.Min.X + panelMargin, Y: (area.Min.Y + area.Max.Y) / 2}, p.Title)
			continue
		}
		if err := drawPanel(draw.Crop(area, panelMargin, -panelMargin, panelMargin, -panelMargin), p, byTitle[p.Title]); err != nil {
			return fmt.Errorf("panel %q: %w", p.Title, err)
		}
	}
	_, err := c.WriteTo(w)
	return err
}

// drawPanel draws a panel's frame, title, series and legend.
func drawPanel(c draw.Canvas, p dashboard.Panel, data panelData) error {
	c.FillPolygon(color.White, rect(c.Rectangle))
	c.StrokeLines(draw.LineStyle{Color: frame, Width: 0.8}, append(rect(c.Rectangle), c.Min))
	title := textStyle(9, true)
	title.YAlign = draw.YTop
	c.FillText(title, vg.Point{X: c.Min.X + 5, Y: c.Max.Y - 4}, p.Title)
	inner := draw.Crop(c, 2, -6, 2, -16)
	if p.Type != "timeseries" {
		note := textStyle(8, false)
		c.FillText(note, vg.Point{X: inner.Min.X + 4, Y: inner.Max.Y - 12}, fmt.Sprintf("(a %s panel: not drawn)", p.Type))
		return nil
	}
	legendHeight := drawLegend(inner, data.Lines)
	pl := plot.New()
	pl.BackgroundColor = color.Transparent
	for _, a := range []*plot.Axis{&pl.X, &pl.Y} {
		a.Tick.Color, a.Color = frame, frame
		a.Tick.Label = textStyle(7, false)
		a.Tick.Marker = plainTicks{}
	}
	pl.X.Label.Text, pl.X.Label.TextStyle = "seconds", textStyle(7, false)
	pl.X.Min = 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, l := range data.Lines {
		xys := make(plotter.XYs, len(l.X))
		for j := range l.X {
			xys[j] = plotter.XY{X: l.X[j], Y: l.Y[j]}
			lo, hi = min(lo, l.Y[j]), max(hi, l.Y[j])
		}
		ln, err := plotter.NewLine(xys)
		if err != nil {
			return err
		}
		ln.Color, ln.Width = palette[i%len(palette)], 1.2
		pl.Add(ln)
	}
	if len(data.Lines) == 0 {
		note := textStyle(8, false)
		c.FillText(note, vg.Point{X: inner.Min.X + 4, Y: inner.Max.Y - 12}, "No data")
		return nil
	}
	// Counts and quantities start at zero; a flat series still gets a range.
	pl.Y.Min, pl.Y.Max = min(0, lo), hi
	if pl.Y.Max <= pl.Y.Min {
		pl.Y.Max = pl.Y.Min + 1
	}
	pl.Y.Max += (pl.Y.Max - pl.Y.Min) * 0.05
	pl.Draw(draw.Crop(inner, 0, 0, legendHeight, 0))
	return nil
}

// drawLegend lists the series under the plot, in as many columns as fit,
// and returns the height it took; past its share of the panel the last
// entry says how many more there are.
func drawLegend(c draw.Canvas, lines []line) vg.Length {
	if len(lines) == 0 {
		return 0
	}
	sty := textStyle(7, false)
	sty.YAlign = draw.YCenter
	var widest vg.Length
	for _, l := range lines {
		widest = max(widest, sty.Width(l.Legend))
	}
	colWidth := legendSwatch + 4 + widest + 10
	cols := max(1, int((c.Max.X-c.Min.X)/colWidth))
	maxRows := max(1, int(legendShare*float64(c.Max.Y-c.Min.Y)/float64(legendLine)))
	rows := (len(lines) + cols - 1) / cols
	shown := len(lines)
	if rows > maxRows {
		rows, shown = maxRows, maxRows*cols-1
	}
	colWidth = (c.Max.X - c.Min.X) / vg.Length(cols)
	for i := 0; i < shown; i++ {
		x := c.Min.X + 6 + vg.Length(i%cols)*colWidth
		y := c.Min.Y + vg.Length(rows-i/cols)*legendLine - legendLine/2
		c.StrokeLine2(draw.LineStyle{Color: palette[i%len(palette)], Width: 2}, x, y, x+legendSwatch, y)
		c.FillText(sty, vg.Point{X: x + legendSwatch + 4, Y: y}, lines[i].Legend)
	}
	if shown < len(lines) {
		x := c.Min.X + 6 + vg.Length(shown%cols)*colWidth
		y := c.Min.Y + vg.Length(rows-shown/cols)*legendLine - legendLine/2
		c.FillText(sty, vg.Point{X: x, Y: y}, fmt.Sprintf("and %d more", len(lines)-shown))
	}
	return vg.Length(rows)*legendLine + 4
}

func rect(r vg.Rectangle) []vg.Point {
	return []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}}
}

// plainTicks are gonum's default ticks labelled in the shortest form, 25
// rather than 25.00.
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 6, 64)
		}
	}
	return ticks
}
