package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCollapserRuleIs_WantsTheMethodsOwnRuleSetToOne(t *testing.T) {
	const head = "# TYPE collapser_method_rule_info gauge\n"
	tests := []struct {
		name, rules string
		ok          bool
	}{
		{"the rule", `collapser_method_rule_info{action="collapse",method="/m",reason=""} 1`, true},
		{"another action", `collapser_method_rule_info{action="passthrough",method="/m",reason="unannotated"} 1`, false},
		{"another method", `collapser_method_rule_info{action="collapse",method="/m2",reason=""} 1`, false},
		{"the method in another label", `collapser_method_rule_info{action="collapse",method="/n",other_method="/m"} 1`, false},
		{"not 1", `collapser_method_rule_info{action="collapse",method="/m",reason=""} 0`, false},
		{"no rules", ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				fmt.Fprintln(w, head+tt.rules)
			}))
			defer srv.Close()
			err := collapserRuleIs(srv.URL, "/m", "collapse")(t.Context())
			if (err == nil) != tt.ok {
				t.Errorf("check = %v, want ok %v", err, tt.ok)
			}
		})
	}
}
