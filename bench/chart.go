package bench

import "cmp"

// Chart is one inline SVG line plot drawn like the plots of the HTML report,
// for other reports built on this package (the fleet simulator's). It is a
// plain value; SVG only reads it, so it is safe for concurrent reads.
type Chart struct {
	// ID names the chart in the SVG's data-chart attribute.
	ID string
	// Title is drawn above the plot and is the SVG's accessible name.
	Title string
	// XLabel and YLabel label the axes.
	XLabel, YLabel string
	// Series are the lines, in legend order.
	Series []Series
	// YFromZero starts the y axis at 0 (or below, for negative values).
	YFromZero bool
}

// Series is one line of a Chart. A point whose x is NaN breaks the line.
type Series struct {
	ID     string // the series' data-target attribute
	Name   string // the legend
	Color  string // a CSS colour; "" means Palette of the series' index
	Points [][2]float64
	Step   bool // draw as a step function
	Dots   bool // mark the points
}

// SVG renders c as a self-contained inline SVG element: every text is
// escaped, and there is no script or external resource.
func (c *Chart) SVG() string {
	ch := chart{id: c.ID, title: c.Title, xLabel: c.XLabel, yLabel: c.YLabel, yMin0: c.YFromZero}
	for i, s := range c.Series {
		ch.series = append(ch.series, series{id: s.ID, name: s.Name, color: cmp.Or(s.Color, Palette(i)), points: s.Points, step: s.Step, dots: s.Dots})
	}
	return ch.svg()
}

// Palette returns the report's i-th series colour (Okabe-Ito, colour-blind
// safe), cycling after eight.
func Palette(i int) string { return palette(i) }
