package chart

import (
	"strings"
	"testing"
)

func TestSchema_RejectsInvalidValuesWithAClearMessage(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want []string // all in the error message
	}{
		{"unknown top-level key", "replicas=2", []string{"additional properties 'replicas' not allowed"}},
		{"unknown nested key (typo)", "collapser.config.cacheTtl=1s", []string{"/collapser/config", "additional properties 'cacheTtl' not allowed"}},
		{"unknown key in a component", "grafana.adminUser=root", []string{"/grafana", "'adminUser'"}},
		{"wrong type", "replicaCount=two", []string{"/replicaCount", "want integer"}},
		{"boolean as a string", "prometheus.enabled=yes", []string{"/prometheus/enabled", "want boolean"}},
		{"list as a string", "collapser.config.keyHeaders=authorization", []string{"/collapser/config/keyHeaders", "want array"}},
		{"duration without a unit", "collapser.config.cacheTTL=100", []string{"/collapser/config/cacheTTL"}},
		{"unknown log level", "collapser.config.logLevel=verbose", []string{"/collapser/config/logLevel"}},
		{"port out of range", "service.port=70000", []string{"/service/port"}},
		{"latest tag", "collapser.image.tag=latest", []string{"/collapser/image/tag"}},
		{"pull policy", "backend.image.pullPolicy=Sometimes", []string{"/backend/image/pullPolicy"}},
		{"unary method format", "collapser.config.collapseMethods={SayHello}", []string{"/collapser/config/collapseMethods/0"}},
		{"collapse ratio above 1", "tests.minCollapseRatio=2", []string{"/tests/minCollapseRatio"}},
		{"connect timeout without a unit", "tests.connectTimeout=30", []string{"/tests/connectTimeout"}},
		{"unknown default collapse", "collapser.config.defaultCollapse=some", []string{"/collapser/config/defaultCollapse"}},
		{"stale duration without a unit", "collapser.config.staleIfError=30", []string{"/collapser/config/staleIfError"}},
		{"private header in upper case", "collapser.config.privateHeaders={X-Session}", []string{"/collapser/config/privateHeaders/0"}},
		{"zero connections", "collapser.config.maxConnections=0", []string{"/collapser/config/maxConnections"}},
		{"GOGC neither a percentage nor off", "collapser.gogc=fast", []string{"/collapser/gogc"}},
		{"GOGC of 0", "collapser.gogc=0", []string{"/collapser/gogc"}},
		{"unknown top-level policy key", "collapser.policy.rules[0].name=x", []string{"/collapser/policy", "additional properties 'rules' not allowed"}},
		{"policy methods not a list", "collapser.policy.methods=x", []string{"/collapser/policy/methods", "want array"}},
		{"digest without algorithm", "collapser.image.digest=0123", []string{"/collapser/image/digest"}},
		{"registry with a path", "backend.image.registry=host/path", []string{"/backend/image/registry"}},
		{"disruption bound not a number or percentage", "podDisruptionBudget.maxUnavailable=some", []string{"/podDisruptionBudget/maxUnavailable"}},
		{"network peers not a list", "networkPolicy.grpcFrom=x", []string{"/networkPolicy/grpcFrom", "want array"}},
		{"prometheus argument not a flag", "prometheus.extraArgs={web.enable-lifecycle}", []string{"/prometheus/extraArgs/0"}},
		{"the removed backend-stats port", "service.backendStatsPort=50051", []string{"/service", "'backendStatsPort'"}},
		{"an issuer without a name", "injector.certManager.issuerRef.kind=ClusterIssuer", []string{"/injector/certManager/issuerRef", "missing property 'name'"}},
		{"an issuer's unknown key", "injector.certManager.issuerRef.namespace=x", []string{"/injector/certManager/issuerRef", "'namespace'"}},
		{"readiness gate not a condition type", "podReadinessGates={target ready}", []string{"/podReadinessGates/0"}},
		{"readiness gates not a list", "podReadinessGates=example.io/target-ready", []string{"/podReadinessGates", "want array"}},
	}
	chrt := loadChart(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderChart(chrt, userValues(t, "", tt.set))
			if err == nil {
				t.Fatalf("--set %s was accepted", tt.set)
			}
			msg := err.Error()
			for _, w := range append([]string{"values don't meet the specifications of the schema"}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestSchema_AcceptsEveryDocumentedValue(t *testing.T) {
	// values.yaml itself, plus values the chart documents but leaves empty by default.
	_ = render(t, "",
		"nameOverride=x",
		"fullnameOverride=my-collapser",
		"imagePullSecrets[0].name=regcred",
		"serviceAccount.name=sa",
		"serviceAccount.annotations.a=b",
		"podAnnotations.a=b",
		"podLabels.team=x",
		"nodeSelector.disk=ssd",
		"tolerations[0].key=k",
		"tolerations[0].operator=Exists",
		"collapser.extraEnv[0].name=GODEBUG",
		"collapser.extraEnv[0].value=x",
		"collapser.config.backend=localhost:7000",
		"collapser.config.ignoreHeaders={x-debug}",
		"collapser.config.descriptorSet=/descriptors/set.pb",
		"collapser.extraVolumeMounts[0].name=descriptors",
		"collapser.extraVolumeMounts[0].mountPath=/descriptors",
		"extraVolumes[0].name=descriptors",
		"extraVolumes[0].configMap.name=descriptors",
		"service.annotations.a=b",
		"grafana.adminPassword=secret-secret-secret",
		"serviceMonitor.relabelings[0].targetLabel=node",
		"serviceMonitor.metricRelabelings[0].action=drop",
		"collapser.policy.methods[0].name=/hello.v1.Greeter/SayHello",
		"collapser.policy.methods[0].stream=replay",
		"podDisruptionBudget.minAvailable=50%",
		"podDisruptionBudget.maxUnavailable=",
		"dashboards.annotations.grafana_folder=collapser",
		"injector.certManager.issuerRef.name=corp-ca",
		"injector.certManager.issuerRef.kind=ClusterIssuer",
		"injector.certManager.issuerRef.group=cert-manager.io",
	)
}

// TestSchema_FormerSettingNamesAreRefused: a values file written for an
// earlier chart fails with the key it names, never silently.
func TestSchema_FormerSettingNamesAreRefused(t *testing.T) {
	for _, key := range []string{"unaryMethods", "streamCacheMaxBytes"} {
		_, err := renderChart(loadChart(t), userValues(t, "", "collapser.config."+key+"=1"))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("collapser.config.%s: err = %v, want one naming it", key, err)
		}
	}
}
