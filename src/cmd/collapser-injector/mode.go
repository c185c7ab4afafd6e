package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/collapser/collapser/src/internal/inject"
)

// nativeSidecars is the first Kubernetes version with native sidecars on
// by default (init containers with restartPolicy Always: beta in 1.29).
var nativeSidecars = version.MajorMinor(1, 29)

// sidecarMode returns the injection mode for --sidecar-mode; for auto it
// asks the API server its version through serverVersion.
func sidecarMode(flag string, serverVersion func() (*apimachineryversion.Info, error)) (inject.Mode, error) {
	switch flag {
	case modeNative:
		return inject.Native, nil
	case modeContainer:
		return inject.Ordinary, nil
	}
	info, err := serverVersion()
	if err != nil {
		return 0, fmt.Errorf("ask the API server its version for --sidecar-mode=auto: %w", err)
	}
	v, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		return 0, fmt.Errorf("API server version %q: %w", info.GitVersion, err)
	}
	if v.AtLeast(nativeSidecars) {
		return inject.Native, nil
	}
	return inject.Ordinary, nil
}
