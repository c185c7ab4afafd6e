package collapser

import (
	"reflect"
	"strconv"
	"testing"
)

// TestPeers_EverySettingReachesTheSidecarsSettings sets every setting of
// Peers (a value of its own each) and finds each in the sidecar's
// settings it becomes: a setting added to Peers and not passed on fails
// here. hello-backend's peersOf maps the other way, and its test checks
// the same of every sidecar setting.
func TestPeers_EverySettingReachesTheSidecarsSettings(t *testing.T) {
	var p Peers
	want := map[string]string{} // value → the Peers field that holds it
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("setting-" + strconv.Itoa(i))
			want[f.String()] = v.Type().Field(i).Name
		case reflect.Bool:
			f.SetBool(true)
			want["true"] = v.Type().Field(i).Name
		}
	}
	got := map[string]bool{}
	s := reflect.ValueOf(p.settings())
	for i := range s.NumField() {
		switch f := s.Field(i); f.Kind() {
		case reflect.String:
			got[f.String()] = true
		case reflect.Bool:
			if f.Bool() {
				got["true"] = true
			}
		}
	}
	for value, field := range want {
		if !got[value] {
			t.Errorf("Peers.%s (%q) is in none of the sidecar's settings", field, value)
		}
	}
}
