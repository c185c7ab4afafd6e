// Package e2e holds the end-to-end tests: they create (or reuse) a kind
// cluster, load the project's images into it, install the chart with Helm
// into a namespace that enforces the "restricted" Pod Security Standard,
// and check what really happened from the hello backend's own counter.
// With Prometheus, the chart's dashboard is evaluated through it as Grafana
// would (package panelquery) and compared with the demo's report and that
// counter.
//
// The release also runs the sidecar injector: workloads of its own, built
// as typed objects (injectorworkloads_test.go) from the project's images,
// get the sidecar in a namespace of their own, and the checks read what
// really happened (the pods' containers, the Service's EndpointSlices, the
// backends' own counts, the injector's metrics). go test -v prints each
// subtest's duration; the injector's check logs its admissions and their
// latency.
//
// They run only when COLLAPSER_E2E=1 (make e2e sets it), so that go test
// ./... in this module stays a unit-test run. Settings, all optional:
//
//	KIND_CLUSTER         cluster name (collapser-e2e)
//	KIND_NODE_IMAGE      node image for a new cluster (kind's default)
//	KIND_CONFIG          kind config file for a new cluster
//	E2E_REUSE_CLUSTER=1  use the cluster if it exists and keep it afterwards
//	E2E_IMAGE_TAG        tag of the project's images (e2e)
//	E2E_PROMETHEUS=1     install the chart's Prometheus and check it and the
//	                     dashboard through it; its image
//	                     (E2E_PROMETHEUS_IMAGE, prom/prometheus:v3.16.0)
//	                     must be in the local docker
//	KIND                 the kind binary (kind on PATH)
//
// helm must be on PATH (Terratest's helm module runs it). A run that was
// interrupted leaves its namespaces (collapser-*) and the injector's
// cluster-scoped objects behind; on a kept cluster, delete them first:
//
//	kubectl delete mutatingwebhookconfigurations,clusterroles,clusterrolebindings \
//	  -l app.kubernetes.io/instance=collapser,app.kubernetes.io/component=injector
package e2e
