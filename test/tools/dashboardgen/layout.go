package main

import "github.com/grafana/grafana-foundation-sdk/go/dashboard"

// gridColumns is the width of Grafana's dashboard grid.
const gridColumns = 24

// layout stacks the rows: each row's heading starts below the previous row's
// lowest panel, and a row's panels are placed relative to its heading, so a
// panel added to one row moves the rows below it without touching them.
type layout struct {
	// top is the y of the current row's heading.
	top uint32
	// bottom is the y just below everything placed so far.
	bottom uint32
}

// row starts a row below everything placed so far: a full-width heading.
func (l *layout) row(id uint32, title string) *dashboard.RowBuilder {
	l.top = l.bottom
	l.bottom = l.top + 1
	return dashboard.NewRowBuilder(title).
		Id(id).
		GridPos(dashboard.GridPos{X: 0, Y: l.top, W: gridColumns, H: 1})
}

// at places a panel of the current row: x and dy count from the heading's
// lower left corner, w and h are the panel's size in grid cells.
func (l *layout) at(x, dy, w, h uint32) dashboard.GridPos {
	p := dashboard.GridPos{X: x, Y: l.top + 1 + dy, W: w, H: h}
	l.bottom = max(l.bottom, p.Y+p.H)
	return p
}
