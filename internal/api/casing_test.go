package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kici.dev/kici/internal/api/apitypes"
	"kici.dev/kici/internal/approval"
	"kici.dev/kici/internal/cluster"
	"kici.dev/kici/internal/contexts"
	"kici.dev/kici/internal/ingest"
	"kici.dev/kici/internal/runctl"
	"kici.dev/kici/internal/runstream"
	"kici.dev/kici/internal/store"
	"kici.dev/kici/internal/trigger"
)

// camelKey is a JSON key in KiCI's admin-API casing: lower camelCase, no
// underscore.
var camelKey = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestAPIJSONKeysAreCamelCase parses every non-test Go file of this package
// and of apitypes and fails on a struct field whose json tag is not
// camelCase: a snake_case key (a store column leaking into the API) would
// break the one casing clients rely on.
func TestAPIJSONKeysAreCamelCase(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	more, _ := filepath.Glob("apitypes/*.go")
	checked := 0
	for _, f := range append(files, more...) {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				t.Fatalf("%s: bad tag %s", fset.Position(field.Pos()), field.Tag.Value)
			}
			key, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if key == "" || key == "-" {
				return true
			}
			checked++
			if !camelKey.MatchString(key) {
				t.Errorf("%s: JSON key %q is not camelCase", fset.Position(field.Pos()), key)
			}
			return true
		})
	}
	if checked < 50 {
		t.Fatalf("only %d json tags found: the walk is not reading the package", checked)
	}
}

// TestAPITypeConstantsMatchTheDomain keeps the client-side copies of the
// context constants equal to the values the store and the gate use.
func TestAPITypeConstantsMatchTheDomain(t *testing.T) {
	if apitypes.ConcurrencyQueue != store.ConcurrencyQueue || apitypes.ConcurrencyCancelPending != store.ConcurrencyCancelPending {
		t.Errorf("concurrency strategies differ: api %q/%q, store %q/%q", apitypes.ConcurrencyQueue, apitypes.ConcurrencyCancelPending,
			store.ConcurrencyQueue, store.ConcurrencyCancelPending)
	}
	if apitypes.ContextTypeFixed != store.ContextTypeFixed || apitypes.ContextTypeGlob != store.ContextTypeGlob {
		t.Error("context types differ between apitypes and store")
	}
	// The hold words are one package (approval/hold) that apitypes and the
	// store both use, so only the fork policy has two copies to compare.
	if apitypes.ForkIgnore != store.ForkIgnore {
		t.Error("fork-policy values differ between apitypes and store")
	}
	if apitypes.DefaultConcurrencyTimeoutMs != contexts.DefaultConcurrencyTimeoutMs {
		t.Errorf("default concurrency timeout: api %d, gate %d", apitypes.DefaultConcurrencyTimeoutMs, contexts.DefaultConcurrencyTimeoutMs)
	}
}

// TestSharedShapesAreTheRows: the rows the admin API serves as they are
// have one definition, in apitypes, which the server's packages alias; a
// server type declared anew (and so free to drift from the served JSON)
// fails here.
func TestSharedShapesAreTheRows(t *testing.T) {
	pairs := []struct{ api, row any }{
		{apitypes.ClusterNode{}, store.ClusterNode{}},
		{apitypes.ApprovalClause{}, store.ApprovalClause{}},
		{apitypes.HeldRunApproval{}, store.HeldRunApproval{}},
		{apitypes.Need{}, store.Need{}},
		{apitypes.GitConfig{}, store.GitConfig{}},
		{apitypes.RejectedDelivery{}, store.RejectedDelivery{}},
		{apitypes.Registration{}, store.Registration{}},
		{apitypes.AccessLogEntry{}, store.AccessLogEntry{}},
		{apitypes.Context{}, store.Context{}},
		{apitypes.ContextBinding{}, store.ContextBinding{}},
		{apitypes.ContextVariable{}, store.ContextVariable{}},
		{apitypes.ContextSourceOverride{}, store.ContextSourceOverride{}},
		{apitypes.Attestation{}, store.Attestation{}},
		{apitypes.DrainStatus{}, runctl.DrainStatus{}},
		{apitypes.Trace{}, ingest.Trace{}},
		{apitypes.RunRef{}, ingest.RunRef{}},
		{apitypes.Decision{}, trigger.Decision{}},
		{apitypes.Check{}, trigger.Check{}},
		{apitypes.LineEvent{}, runstream.LineEvent{}},
		{apitypes.ClusterSettingsView{}, cluster.View{}},
		{apitypes.HeldRunDecision{}, approval.Result{}},
	}
	for _, p := range pairs {
		if a, r := reflect.TypeOf(p.api), reflect.TypeOf(p.row); a != r {
			t.Errorf("%s is declared apart from %s; alias it", r, a)
		}
	}
}
