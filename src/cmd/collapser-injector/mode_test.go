package main

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/version"

	"github.com/collapser/collapser/src/internal/inject"
)

func TestSidecarMode(t *testing.T) {
	tests := []struct {
		flag, server string
		want         inject.Mode
	}{
		{modeNative, "", inject.Native},
		{modeContainer, "", inject.Ordinary},
		{modeAuto, "v1.28.9", inject.Ordinary},
		{modeAuto, "v1.29.0", inject.Native},
		{modeAuto, "v1.34.0+k3s1", inject.Native},
	}
	for _, tt := range tests {
		asked := false
		got, err := sidecarMode(tt.flag, func() (*version.Info, error) {
			asked = true
			return &version.Info{GitVersion: tt.server}, nil
		})
		if err != nil || got != tt.want || asked != (tt.flag == modeAuto) {
			t.Errorf("sidecarMode(%s, %q) = %v, %v (asked the server: %v); want %v", tt.flag, tt.server, got, err, asked, tt.want)
		}
	}
	if _, err := sidecarMode(modeAuto, func() (*version.Info, error) { return nil, errors.New("unreachable") }); err == nil {
		t.Error("auto with an unreachable API server: err = nil, want an error")
	}
	if _, err := sidecarMode(modeAuto, func() (*version.Info, error) { return &version.Info{GitVersion: "one"}, nil }); err == nil {
		t.Error("auto with an unparsable version: err = nil, want an error")
	}
}
