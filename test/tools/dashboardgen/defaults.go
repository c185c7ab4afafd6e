//lint:file-ignore SA1019 a classic (schemaVersion 39) dashboard, the model Grafana provisions from files; dashboardv2 is another format

package main

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/table"
)

// omitDefaults clears what the SDK's constructors fill in that the dashboard
// leaves to Grafana: settings we never set, at the value Grafana assumes when
// they are absent, or of another kind of variable. Grafana omits them when it
// saves a dashboard, and so does our file. Only optional fields are cleared;
// the ones the SDK always writes (a stat's wideLayout, a legend's calcs …)
// stay, at Grafana's defaults.
func omitDefaults(d *dashboard.Dashboard) {
	for _, p := range d.Panels {
		if p.Panel == nil {
			continue
		}
		p.Panel.Transparent = nil     // false
		p.Panel.RepeatDirection = nil // "h", used only with repeat
		if o, ok := p.Panel.Options.(*table.Options); ok {
			o.ShowTypeIcons = nil // false
			o.Footer = nil        // not shown
		}
	}
	for i := range d.Templating.List {
		v := &d.Templating.List[i]
		v.AllowCustomValue = nil // true
		// Settings of interval variables.
		v.Auto, v.AutoMin, v.AutoCount = nil, nil, nil
	}
	for i := range d.Annotations.List {
		// Absent, the toggle stays where it is (here hidden), not in the controls menu.
		d.Annotations.List[i].Placement = nil
	}
	if d.Timepicker != nil {
		d.Timepicker.Hidden = nil // false
	}
}
