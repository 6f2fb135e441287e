package contexts

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"kici.dev/kici/internal/approval/hold"
	"kici.dev/kici/internal/store"
)

// The store satisfies Lookup, so callers pass it directly.
var _ Lookup = store.Store(nil)

// fakeLookup serves contexts from memory, keyed by name.
type fakeLookup struct {
	ctxs    []*store.Context
	listErr error
	getErr  error
	gets    int
}

func (f *fakeLookup) GetContext(_ context.Context, orgID, name string) (*store.Context, error) {
	f.gets++
	if f.getErr != nil {
		return nil, f.getErr
	}
	for _, c := range f.ctxs {
		if c.OrgID == orgID && c.Name == name {
			return c, nil
		}
	}
	return nil, store.ErrNotFound
}

func (f *fakeLookup) ListContexts(_ context.Context, orgID string) ([]*store.Context, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*store.Context
	for _, c := range f.ctxs {
		if c.OrgID == orgID {
			out = append(out, c)
		}
	}
	return out, nil
}

// fixed returns an enabled fixed context of org o1.
func fixed(name string) *store.Context {
	return &store.Context{ID: "id-" + name, OrgID: "o1", Name: name, Type: store.ContextTypeFixed, Enabled: true,
		BranchRestrictions: []string{}, TriggerTypeFilters: []string{}, RepoPatterns: []string{}}
}

// globCtx returns an enabled glob context of org o1.
func globCtx(name, pat string) *store.Context {
	c := fixed(name)
	c.Type = store.ContextTypeGlob
	c.GlobPattern = pat
	return c
}

func i64(v int64) *int64   { return &v }
func str(v string) *string { return &v }

func TestMatch(t *testing.T) {
	l := &fakeLookup{ctxs: []*store.Context{
		fixed("release"),
		globCtx("deploy-any", "deploy-*"),
		globCtx("deploy-prod", "deploy-prod*"),
		// Same literal count (7: "deploy-") as deploy-any but more wildcards.
		globCtx("deploy-q", "deploy-?*"),
		// Ties with "b-tie" on literal and wildcard counts; alphabetically first wins.
		globCtx("z-tie", "svc-*-a"),
		globCtx("b-tie", "svc-a-*"),
		// A glob context is also reachable by its own name.
		globCtx("rel*", "rel*"),
		// Invalid pattern never matches.
		globCtx("broken", "@(x|y"),
		// Fixed contexts are never matched by pattern, even with glob text in
		// their pattern field.
		{ID: "id-f", OrgID: "o1", Name: "f", Type: store.ContextTypeFixed, GlobPattern: "*", Enabled: true},
		// Another org's glob context.
		{ID: "id-other", OrgID: "o2", Name: "other", Type: store.ContextTypeGlob, GlobPattern: "*", Enabled: true},
	}}
	cases := []struct{ name, want string }{
		{"release", "release"},            // exact
		{"deploy-prod-eu", "deploy-prod"}, // most literal characters
		{"deploy-dev", "deploy-any"},      // deploy-q has as many literals but more wildcards
		{"svc-a-a", "b-tie"},              // full tie → alphabetical
		{"rel*", "rel*"},                  // exact name of a glob context
		{"relx", "rel*"},
		{"x", ""},
		{"y", ""},
	}
	for _, c := range cases {
		got, err := Match(context.Background(), l, "o1", c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		gotName := ""
		if got != nil {
			gotName = got.Name
		}
		if gotName != c.want {
			t.Errorf("Match(%q) = %q, want %q", c.name, gotName, c.want)
		}
	}
	// No match in another org.
	if got, err := Match(context.Background(), l, "o3", "release"); got != nil || err != nil {
		t.Errorf("other org: %v %v", got, err)
	}
}

func TestMatchErrors(t *testing.T) {
	boom := errors.New("boom")
	if _, err := Match(context.Background(), &fakeLookup{getErr: boom}, "o1", "x"); !errors.Is(err, boom) {
		t.Errorf("get error = %v", err)
	}
	if _, err := Match(context.Background(), &fakeLookup{listErr: boom}, "o1", "x"); !errors.Is(err, boom) {
		t.Errorf("list error = %v", err)
	}
	if _, _, err := Resolve(context.Background(), &fakeLookup{listErr: boom}, "o1", []string{"x"}); !errors.Is(err, boom) {
		t.Errorf("resolve error = %v", err)
	}
}

func TestSpecificity(t *testing.T) {
	for p, want := range map[string][2]int{
		"deploy-*":     {7, 1},
		"a?[bc]{d,e}":  {6, 5},
		"@(x|y)+(z)!q": {4, 8},
		"héllo":        {5, 0},
	} {
		lit, wild := specificity(p)
		if lit != want[0] || wild != want[1] {
			t.Errorf("specificity(%q) = %d, %d, want %v", p, lit, wild, want)
		}
	}
}

func TestResolve(t *testing.T) {
	l := &fakeLookup{ctxs: []*store.Context{fixed("release"), fixed("audit"), globCtx("deploy", "deploy-*")}}
	bound, skipped, err := Resolve(context.Background(), l, "o1",
		[]string{"release", "deploy-eu", "missing", "deploy-us", "audit", "release", "gone-*"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range bound {
		got = append(got, b.Declared+"→"+b.Context.Name)
	}
	want := []string{"release→release", "deploy-eu→deploy", "audit→audit"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("bound = %v, want %v", got, want)
	}
	if !reflect.DeepEqual(skipped, []string{"missing", "gone-*"}) {
		t.Errorf("skipped = %v", skipped)
	}
	if cs := Contexts(bound); len(cs) != 3 || cs[1].Name != "deploy" {
		t.Errorf("Contexts = %v", cs)
	}
	// Nothing declared: nothing bound, no error.
	bound, skipped, err = Resolve(context.Background(), l, "o1", nil)
	if err != nil || bound != nil || skipped != nil {
		t.Errorf("empty: %v %v %v", bound, skipped, err)
	}
}

func TestCheckGates(t *testing.T) {
	base := RunFacts{OrgID: "o1", Repo: "acme/api", TriggerType: "push", TargetBranch: "main", TrustTier: store.TrustTrusted}
	mk := func(mut func(c *store.Context)) []Bound {
		c := fixed("release")
		mut(c)
		return []Bound{{Declared: "release", Context: c}}
	}
	cases := []struct {
		name   string
		bound  []Bound
		facts  func(f *RunFacts)
		reason GateReason
		msg    string
	}{
		{"no restrictions", mk(func(c *store.Context) {}), nil, "", ""},
		{"disabled", mk(func(c *store.Context) { c.Enabled = false }), nil, ReasonContextDisabled,
			"multi-context gate: 'release' rejected (context_disabled: context is disabled)"},
		{"branch glob ok", mk(func(c *store.Context) { c.BranchRestrictions = []string{"main", "release/*"} }),
			func(f *RunFacts) { f.TargetBranch = "release/1.2" }, "", ""},
		{"branch restricted", mk(func(c *store.Context) { c.BranchRestrictions = []string{"main", "release/*"} }),
			func(f *RunFacts) { f.TargetBranch = "dev" }, ReasonBranchRestricted,
			`multi-context gate: 'release' rejected (branch_restricted: branch "dev" not in [main release/*])`},
		{"star does not cross slash", mk(func(c *store.Context) { c.BranchRestrictions = []string{"release/*"} }),
			func(f *RunFacts) { f.TargetBranch = "release/1/hotfix" }, ReasonBranchRestricted, ""},
		{"empty branch always fails", mk(func(c *store.Context) { c.BranchRestrictions = []string{"**"} }),
			func(f *RunFacts) { f.TargetBranch = "" }, ReasonBranchRestricted,
			`multi-context gate: 'release' rejected (branch_restricted: no target branch, allowed [**])`},
		{"invalid branch glob never matches", mk(func(c *store.Context) { c.BranchRestrictions = []string{"@(main"} }),
			nil, ReasonBranchRestricted, ""},
		{"trigger ok", mk(func(c *store.Context) { c.TriggerTypeFilters = []string{"manual", "push"} }), nil, "", ""},
		{"trigger filtered", mk(func(c *store.Context) { c.TriggerTypeFilters = []string{"manual"} }), nil, ReasonTriggerFiltered,
			`multi-context gate: 'release' rejected (trigger_filtered: trigger type "push" not in [manual])`},
		{"trigger filter is exact", mk(func(c *store.Context) { c.TriggerTypeFilters = []string{"pu*"} }), nil, ReasonTriggerFiltered, ""},
		{"repo ok", mk(func(c *store.Context) { c.RepoPatterns = []string{"acme/*"} }), nil, "", ""},
		{"repo unmatched", mk(func(c *store.Context) { c.RepoPatterns = []string{"acme/web", "ops/*"} }), nil, ReasonRepoUnmatched,
			`multi-context gate: 'release' rejected (repo_unmatched: repo "acme/api" not in [acme/web ops/*])`},
		{"empty repo fails", mk(func(c *store.Context) { c.RepoPatterns = []string{"**"} }),
			func(f *RunFacts) { f.Repo = "" }, ReasonRepoUnmatched, ""},
		{"disabled checked before branch", mk(func(c *store.Context) { c.Enabled = false; c.BranchRestrictions = []string{"x"} }),
			nil, ReasonContextDisabled, ""},
		{"branch checked before trigger", mk(func(c *store.Context) {
			c.BranchRestrictions = []string{"x"}
			c.TriggerTypeFilters = []string{"manual"}
			c.RepoPatterns = []string{"x/y"}
		}), nil, ReasonBranchRestricted, ""},
		{"trigger checked before repo", mk(func(c *store.Context) {
			c.TriggerTypeFilters = []string{"manual"}
			c.RepoPatterns = []string{"x/y"}
		}), nil, ReasonTriggerFiltered, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := base
			if c.facts != nil {
				c.facts(&f)
			}
			r := CheckGates(f, c.bound)
			if c.reason == "" {
				if r != nil {
					t.Fatalf("rejected: %s", r.Message())
				}
				return
			}
			if r == nil {
				t.Fatalf("passed, want %s", c.reason)
			}
			if r.Reason != c.reason || r.Context != "release" {
				t.Fatalf("rejection = %+v, want reason %s", r, c.reason)
			}
			if c.msg != "" && r.Message() != c.msg {
				t.Fatalf("message = %q\nwant      %q", r.Message(), c.msg)
			}
			if r.Error() != r.Message() {
				t.Fatalf("Error() = %q", r.Error())
			}
		})
	}
}

func TestCheckGatesFirstContextWins(t *testing.T) {
	a := fixed("a")
	a.TriggerTypeFilters = []string{"manual"}
	b := fixed("b")
	b.Enabled = false
	ok := fixed("ok")
	f := RunFacts{TriggerType: "push", TargetBranch: "main", Repo: "x/y"}
	if r := CheckGates(f, []Bound{{"ok", ok}, {"a", a}, {"b", b}}); r == nil || r.Context != "a" || r.Reason != ReasonTriggerFiltered {
		t.Fatalf("got %+v, want a/trigger_filtered", r)
	}
	if r := CheckGates(f, []Bound{{"b", b}, {"a", a}}); r == nil || r.Context != "b" || r.Reason != ReasonContextDisabled {
		t.Fatalf("got %+v, want b/context_disabled", r)
	}
	if r := CheckGates(f, nil); r != nil {
		t.Fatalf("no contexts rejected: %+v", r)
	}
}

func TestAggregate(t *testing.T) {
	a := fixed("a")
	a.RequiredReviewers = []string{"carol", "alice"}
	a.WaitTimerSeconds = i64(60)
	a.HoldExpirySeconds = i64(7200)
	b := fixed("b")
	b.MinimumTrust = str("trusted")
	b.RequiredReviewers = []string{"bob", "alice"}
	b.WaitTimerSeconds = i64(300)
	b.HoldExpirySeconds = i64(600)
	c := fixed("c")
	c.WaitTimerSeconds = i64(0)    // unset
	c.HoldExpirySeconds = i64(600) // ties the minimum
	c.MinimumTrust = str("known")  // retired value: no floor
	c.ConcurrencyLimit = i64(3)
	c.ConcurrencyStrategy = store.ConcurrencyCancelPending // the first context with a limit decides
	c.ConcurrencyTimeoutMs = i64(120_000)
	d := fixed("d")
	d.ConcurrencyStrategy = store.ConcurrencyQueue
	d.ConcurrencyTimeoutMs = i64(60_000) // the smallest timeout wins
	d.HoldExpirySeconds = i64(0)         // unset
	d.ConcurrencyLimit = i64(2)

	p := Aggregate([]Bound{{"a", a}, {"b", b}, {"c", c}, {"d", d}})
	want := Policy{
		TrustFloor: true, TrustContexts: []string{"b"},
		Reviewers: []string{"alice", "bob", "carol"}, ReviewerContexts: []string{"a", "b"},
		WaitTimerSeconds: 300, TimerContexts: []string{"a", "b"},
		HoldExpirySeconds: 600, ExpiryContexts: []string{"b", "c"},
		ConcurrencyGroups: map[string]int64{"c": 3, "d": 2}, ConcurrencyLimit: 2, ConcurrencyContexts: []string{"c", "d"},
		ConcurrencyStrategy: store.ConcurrencyCancelPending, ConcurrencyTimeoutMs: 60_000,
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("Aggregate =\n%+v\nwant\n%+v", p, want)
	}
	if k, l := p.GroupKey(), p.SlotLimits(); k != "c,d" || l["c"] != 3 || l["d"] != 2 || len(l) != 2 {
		t.Fatalf("GroupKey %q, SlotLimits %v", k, l)
	}

	// Nothing set: defaults.
	d.ConcurrencyLimit = nil
	p = Aggregate([]Bound{{"d", d}})
	if !reflect.DeepEqual(p, Policy{HoldExpirySeconds: DefaultHoldExpirySeconds}) {
		t.Fatalf("empty aggregate = %+v", p)
	}
	if p := Aggregate(nil); p.HoldExpirySeconds != 3600 || p.TrustFloor || p.Reviewers != nil {
		t.Fatalf("nil aggregate = %+v", p)
	}
}

func TestEvaluate(t *testing.T) {
	full := Policy{
		TrustFloor: true, TrustContexts: []string{"prod"},
		Reviewers: []string{"alice", "bob"}, ReviewerContexts: []string{"release"},
		WaitTimerSeconds: 90, TimerContexts: []string{"release", "prod"},
		HoldExpirySeconds: 1200,
	}
	fork := RunFacts{TrustTier: store.TrustUnknown}
	same := RunFacts{TrustTier: store.TrustTrusted}
	cases := []struct {
		name     string
		p        Policy
		f        RunFacts
		done     Done
		verdict  Verdict
		holdType hold.Type
	}{
		{"fork held by trust floor first", full, fork, Done{}, Hold, hold.Security},
		{"trusted skips trust gate", full, same, Done{}, Hold, hold.Reviewer},
		{"missing tier passes trust gate", full, RunFacts{}, Done{}, Hold, hold.Reviewer},
		{"trust approved → reviewers", full, fork, Done{TrustApproved: true}, Hold, hold.Reviewer},
		{"reviewers approved → timer", full, same, Done{ReviewersApproved: true}, Hold, hold.Timer},
		{"all done", full, fork, Done{true, true, true}, Pass, ""},
		{"timer elapsed but reviewers pending", full, same, Done{TimerElapsed: true}, Hold, hold.Reviewer},
		{"no floor, fork", Policy{HoldExpirySeconds: 3600}, fork, Done{}, Pass, ""},
		{"timer only", Policy{WaitTimerSeconds: 5, TimerContexts: []string{"x"}, HoldExpirySeconds: 3600}, same, Done{}, Hold, hold.Timer},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Evaluate(c.p, c.f, c.done)
			if d.Verdict != c.verdict || d.HoldType != c.holdType {
				t.Fatalf("decision = %+v, want %s/%s", d, c.verdict, c.holdType)
			}
			if c.verdict == Pass && !reflect.DeepEqual(d, Decision{Verdict: Pass}) {
				t.Fatalf("pass decision carries data: %+v", d)
			}
		})
	}

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	d := Evaluate(full, fork, Done{})
	if d.QueueType != hold.QueueSecurity || d.Reason != hold.ReasonContextTrust ||
		!reflect.DeepEqual(d.Contexts, []string{"prod"}) || d.Expiry != 20*time.Minute || d.Clauses != nil ||
		!d.ExpiresAt(now).Equal(now.Add(20*time.Minute)) {
		t.Errorf("trust decision = %+v", d)
	}
	d = Evaluate(full, same, Done{})
	wantClauses := []store.ApprovalClause{{Kind: "user", Value: "alice"}, {Kind: "user", Value: "bob"}}
	if d.QueueType != hold.QueueContext || d.Reason != "context 'release' requires approval from alice, bob" ||
		!reflect.DeepEqual(d.Clauses, wantClauses) || !reflect.DeepEqual(d.Contexts, []string{"release"}) ||
		d.Expiry != 20*time.Minute {
		t.Errorf("reviewer decision = %+v", d)
	}
	d = Evaluate(full, same, Done{ReviewersApproved: true})
	if d.QueueType != hold.QueueContext || d.Duration != 90*time.Second ||
		!reflect.DeepEqual(d.Contexts, []string{"prod", "release"}) ||
		d.Reason != "contexts 'prod', 'release' require a wait of 90 s" ||
		!d.ExpiresAt(now).Equal(now.Add(90*time.Second)) {
		t.Errorf("timer decision = %+v", d)
	}
	two := full
	two.ReviewerContexts = []string{"release", "audit"}
	if d := Evaluate(two, same, Done{}); d.Reason != "contexts 'audit', 'release' require approval from alice, bob" {
		t.Errorf("two-context reason = %q", d.Reason)
	}
}

// End to end over Aggregate: the decision reflects the aggregated policy.
func TestAggregateThenEvaluate(t *testing.T) {
	a := fixed("release")
	a.RequiredReviewers = []string{"bob", "alice", "bob"}
	a.HoldExpirySeconds = i64(120)
	d := Evaluate(Aggregate([]Bound{{"release", a}}), RunFacts{TrustTier: store.TrustTrusted}, Done{})
	if d.Reason != "context 'release' requires approval from alice, bob" || len(d.Clauses) != 2 || d.Expiry != 2*time.Minute {
		t.Fatalf("decision = %+v", d)
	}
}

func TestMergeVariables(t *testing.T) {
	v := func(k, val string, locked bool) *store.ContextVariable {
		return &store.ContextVariable{Key: k, Value: val, Locked: locked}
	}
	o := func(k, val string) *store.ContextSourceOverride {
		return &store.ContextSourceOverride{RoutingKey: "gh", Key: k, Value: val}
	}
	got := MergeVariables([]VarLayer{
		{
			Variables: []*store.ContextVariable{v("REGION", "eu", false), v("TIER", "gold", true), v("A_ONLY", "a", false)},
			Overrides: []*store.ContextSourceOverride{o("REGION", "us"), o("TIER", "free"), o("NEW", "added")},
		},
		{
			// A later context wins even over an earlier locked variable:
			// locking only protects against source overrides.
			Variables: []*store.ContextVariable{v("TIER", "silver", false), v("REGION", "ap", true)},
			Overrides: []*store.ContextSourceOverride{o("REGION", "sa"), nil},
		},
		{Variables: []*store.ContextVariable{nil}},
	})
	want := map[string]string{"REGION": "ap", "TIER": "silver", "A_ONLY": "a", "NEW": "added"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MergeVariables = %v, want %v", got, want)
	}
	// Within one context, an override beats an unlocked variable.
	got = MergeVariables([]VarLayer{{Variables: []*store.ContextVariable{v("X", "1", false)}, Overrides: []*store.ContextSourceOverride{o("X", "2")}}})
	if got["X"] != "2" {
		t.Fatalf("override lost: %v", got)
	}
	if got := MergeVariables(nil); got == nil || len(got) != 0 {
		t.Fatalf("empty merge = %v", got)
	}
}

func TestHostMatches(t *testing.T) {
	a := AgentFacts{ID: "agent-7", Hostname: "build-eu-1.example.com", Labels: []string{"kici:os:linux", "team:infra", "gpu"}}
	cases := []struct {
		pattern string
		want    bool
	}{
		{"", true},
		{"*", true},
		{"**", true},
		{"agent-7", true}, // exact id
		{"agent-8", false},
		{"build-eu-1.example.com", true}, // exact hostname
		{"gpu", true},                    // exact label
		{"build-*", true},                // glob on hostname
		{"agent-?", true},                // glob on id
		{"team:*", true},                 // glob on label
		{"build-us-*", false},
		{"@(broken", false},                // invalid glob
		{"/^build-(eu|us)-\\d+\\./", true}, // regex on hostname
		{"/^BUILD-/", false},
		{"/^BUILD-/i", true},  // case-insensitive flag
		{"/os:linux$/", true}, // regex on a label
		{"/^agent-7$/", true},
		{"/^agent-/g", false},  // unsupported flag never matches
		{"/(unclosed/", false}, // invalid regex never matches
		{"/x", false},          // not a regex form, a glob matching nothing
	}
	for _, c := range cases {
		if got := HostMatches(c.pattern, a); got != c.want {
			t.Errorf("HostMatches(%q) = %v, want %v", c.pattern, got, c.want)
		}
	}
}

func TestScopeGranted(t *testing.T) {
	a := AgentFacts{ID: "agent-7", Hostname: "box1", Labels: []string{"kici:os:linux", "team=infra", "region:eu"}}
	bind := func(scope, host string) []*store.ContextBinding {
		return []*store.ContextBinding{{ScopePattern: scope, HostPattern: host}}
	}
	cases := []struct {
		name     string
		bindings []*store.ContextBinding
		scope    string
		want     bool
	}{
		{"exact", bind("release", "**"), "release", true},
		{"exact other", bind("release", "**"), "release2", false},
		{"star child", bind("release/*", "**"), "release/x", true},
		{"star not parent", bind("release/*", "**"), "release", false},
		{"star one level", bind("release/*", "**"), "release/x/y", false},
		{"globstar", bind("team/**", ""), "team/prod/db", true},
		{"host mismatch", bind("release", "other-*"), "release", false},
		{"host match", bind("release", "box?"), "release", true},
		{"agentId", bind("agents/${agentId}", "**"), "agents/agent-7", true},
		{"agentId other", bind("agents/${agentId}", "**"), "agents/agent-8", false},
		{"host", bind("hosts/${host}/*", "**"), "hosts/box1/db", true},
		{"label colon", bind("team/${label:region}", "**"), "team/eu", true},
		{"label equals", bind("team/${label:team}", "**"), "team/infra", true},
		{"label nested name", bind("os/${label:kici:os}", "**"), "os/linux", true},
		{"missing label", bind("team/${label:zone}", "**"), "team/", false},
		{"missing label never applies", bind("${label:zone}*", "**"), "x", false},
		{"unknown placeholder kept", bind("x/${other}", "**"), "x/${other}", true},
		{"nil binding", []*store.ContextBinding{nil}, "release", false},
		{"no bindings", nil, "release", false},
		{"second binding grants", []*store.ContextBinding{{ScopePattern: "a", HostPattern: "**"}, {ScopePattern: "b", HostPattern: "**"}}, "b", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := ScopeGranted(c.bindings, c.scope, a); got != c.want {
				t.Fatalf("ScopeGranted(%q) = %v, want %v", c.scope, got, c.want)
			}
		})
	}
	// An agent name with glob syntax is substituted literally.
	odd := AgentFacts{ID: "a*"}
	if ScopeGranted(bind("agents/${agentId}", "**"), "agents/abc", odd) {
		t.Error("agent id was interpreted as a glob")
	}
	if !ScopeGranted(bind("agents/${agentId}", "**"), "agents/a*", odd) {
		t.Error("agent id with glob syntax does not match itself")
	}
	// An agent without a hostname does not apply to ${host} bindings.
	if ScopeGranted(bind("hosts/${host}", "**"), "hosts/", AgentFacts{ID: "x"}) {
		t.Error("empty hostname applied")
	}
}

func TestSecretsAllowed(t *testing.T) {
	c := fixed("release")
	open := fixed("open")
	open.AllowUntrusted = true
	for _, tc := range []struct {
		c    *store.Context
		tier string
		want bool
	}{
		{c, store.TrustTrusted, true},
		{c, "", true},
		{c, store.TrustUnknown, false},
		{open, store.TrustUnknown, true},
		{nil, store.TrustUnknown, false},
	} {
		if got := SecretsAllowed(tc.c, RunFacts{TrustTier: tc.tier}); got != tc.want {
			t.Errorf("SecretsAllowed(%v, %q) = %v", tc.c != nil && tc.c.AllowUntrusted, tc.tier, got)
		}
	}
}

func TestUnsatisfiable(t *testing.T) {
	mk := func(name string, mut func(c *store.Context)) *store.Context {
		c := fixed(name)
		mut(c)
		return c
	}
	branches := func(b ...string) func(c *store.Context) { return func(c *store.Context) { c.BranchRestrictions = b } }
	triggers := func(b ...string) func(c *store.Context) { return func(c *store.Context) { c.TriggerTypeFilters = b } }
	repos := func(b ...string) func(c *store.Context) { return func(c *store.Context) { c.RepoPatterns = b } }
	none := func(*store.Context) {}
	cases := []struct {
		name  string
		bound []*store.Context
		want  string // "" = satisfiable
	}{
		{"nothing", nil, ""},
		{"one restricted", []*store.Context{mk("a", branches("main"))}, ""},
		{"disabled", []*store.Context{mk("a", none), mk("b", func(c *store.Context) { c.Enabled = false })}, "context 'b' is disabled"},
		{"overlapping branches", []*store.Context{mk("a", branches("main", "dev")), mk("b", branches("dev"))}, ""},
		{"disjoint branches", []*store.Context{mk("a", branches("main")), mk("b", branches("dev", "qa"))},
			"contexts 'a' and 'b' restrict branches to disjoint sets [main] and [dev qa]"},
		{"glob branch left alone", []*store.Context{mk("a", branches("main")), mk("b", branches("release/*"))}, ""},
		{"glob on either side", []*store.Context{mk("a", branches("rel{ease,}")), mk("b", branches("main"))}, ""},
		{"negation is glob", []*store.Context{mk("a", branches("!main")), mk("b", branches("main"))}, ""},
		{"unrestricted side", []*store.Context{mk("a", branches("main")), mk("b", none)}, ""},
		{"disjoint triggers", []*store.Context{mk("a", triggers("push")), mk("b", triggers("manual"))}, "restrict trigger types to disjoint sets"},
		{"overlapping triggers", []*store.Context{mk("a", triggers("push", "manual")), mk("b", triggers("manual"))}, ""},
		{"disjoint repos", []*store.Context{mk("a", repos("acme/api")), mk("b", repos("acme/web"))}, "restrict repositories"},
		{"glob repos left alone", []*store.Context{mk("a", repos("acme/*")), mk("b", repos("ops/web"))}, ""},
		{"third pair", []*store.Context{mk("a", none), mk("b", triggers("push")), mk("c", triggers("pull_request"))}, "contexts 'b' and 'c'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Unsatisfiable(c.bound)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error = %v, want containing %q", err, c.want)
			}
		})
	}
}
