package lockfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"kici.dev/kici/internal/runs/status"
)

// exampleLock is the two-workflow schema 29 example lock in testdata,
// shaped as KiCI's TypeScript compiler writes it.
func exampleLock(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/kici-example-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNeedJSON(t *testing.T) {
	cases := []struct {
		name string
		need Need
		json string
	}{
		{"plain", Need{Name: "lint", RunOn: []status.Job{status.JobSuccess}}, `"lint"`},
		{"nil runOn", Need{Name: "lint"}, `"lint"`},
		{"always", Need{Name: "test", RunOn: []status.Job{status.JobSuccess, status.JobFailed}}, `{"name":"test","runOn":["success","failed"]}`},
		{"skipped only", Need{Name: "a<b", RunOn: []status.Job{status.JobSkipped}}, `{"name":"a<b","runOn":["skipped"]}`},
		{"group", Need{Group: "shards", RunOn: []status.Job{status.JobSuccess, status.JobSkipped}}, `{"group":"shards","runOn":["success","skipped"]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := marshalNoEscape(c.need)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.json {
				t.Fatalf("marshal = %s, want %s", b, c.json)
			}
			var back Need
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			want := c.need
			if want.RunOn == nil {
				want.RunOn = []status.Job{status.JobSuccess}
			}
			if !reflect.DeepEqual(back, want) {
				t.Fatalf("round trip = %+v, want %+v", back, want)
			}
		})
	}
	var n Need
	if err := json.Unmarshal([]byte(`{"name":"x"}`), &n); err != nil || !reflect.DeepEqual(n.RunOn, []status.Job{status.JobSuccess}) {
		t.Fatalf("object without runOn = %+v, %v", n, err)
	}
	if err := json.Unmarshal([]byte(`42`), &n); err == nil {
		t.Fatal("number need accepted")
	}
}

func TestWorkflowContentHash(t *testing.T) {
	const want = "ede1f36f39f77857079866673fbc73e70198623be851c2ec946e67a1dd41ddba"
	for _, src := range []string{"abc\n", "abc\r\n", "abc\r"} {
		if got := WorkflowContentHash([]byte(src)); got != want {
			t.Errorf("WorkflowContentHash(%q) = %s, want %s", src, got, want)
		}
	}
	if WorkflowContentHash([]byte("abd\n")) == want {
		t.Error("different source, same hash")
	}
}

// TestTopLevelHashVector checks that example's vector with the order-preserving
// hasher. Our LockFile struct cannot reproduce that document byte for byte
// (it does not model cache, maxParallel, failFast, rules, parallel steps,
// dynamic jobs, runsOnAll, environments, … which KiCI's TypeScript compiler
// emits and kici's YAML compiler never does), so the struct encoder is
// checked separately against the same hasher in TestContentHashMatchesEncoder.
func TestTopLevelHashVector(t *testing.T) {
	got, err := HashLockJSON(exampleLock(t))
	if err != nil {
		t.Fatal(err)
	}
	const want = "1b9f49391c112a341060f686791df1e4ea5756473ddd3a2b6bbdc867c2a62697"
	if got != want {
		t.Fatalf("HashLockJSON = %s, want %s", got, want)
	}
	var doc struct {
		ContentHash string `json:"contentHash"`
	}
	_ = json.Unmarshal(exampleLock(t), &doc)
	if doc.ContentHash != want {
		t.Fatalf("example contentHash field = %s", doc.ContentHash)
	}
}

func TestContentHashMatchesEncoder(t *testing.T) {
	root := writeRepo(t, map[string]string{"ci.yaml": fullExample})
	lf, data, err := CompileDir(root)
	if err != nil {
		t.Fatal(err)
	}
	fromRaw, err := HashLockJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	if lf.ContentHash != fromRaw {
		t.Fatalf("struct hash %s != raw hash %s", lf.ContentHash, fromRaw)
	}
	// The encoded lock re-parses and re-encodes to the same bytes.
	back, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Encode(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Fatalf("re-encode differs:\n%s\n---\n%s", again, data)
	}
}

func TestEncodeFormat(t *testing.T) {
	lf := &LockFile{SchemaVersion: 29, Source: SourceRef{File: "a", Export: "#default"}, Workflows: []Workflow{{
		Name: "w", Triggers: []Trigger{}, Jobs: []Job{{Type: JobStatic, Name: "j", RunsOn: []LabelMatcher{}, Needs: []Need{},
			Steps: []Step{{Name: "s", Run: "a && b < c > d \u2028"}}}},
	}}}
	b, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.HasSuffix(s, "}\n") || strings.HasSuffix(s, "\n\n") {
		t.Errorf("want exactly one trailing newline: %q", s[len(s)-5:])
	}
	if !strings.Contains(s, "\n  \"schemaVersion\": 29,") {
		t.Errorf("want 2-space indent:\n%s", s)
	}
	if !strings.Contains(s, `"run": "a && b < c > d `+"\u2028"+`"`) {
		t.Errorf("HTML or U+2028 escaped:\n%s", s)
	}
}

func TestParseExample(t *testing.T) {
	lf, err := Parse(exampleLock(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(lf.Workflows) != 2 || lf.Workflows[0].Name != "ci" {
		t.Fatalf("workflows = %+v", lf.Workflows)
	}
	report := lf.Workflows[0].Jobs[3]
	if report.Name != "report" || len(report.Needs) != 2 || report.Needs[1].Group != "shards" {
		t.Fatalf("report needs = %+v", report.Needs)
	}
	test := lf.Workflows[0].Jobs[1]
	if !reflect.DeepEqual(test.Needs, []Need{{Name: "lint", RunOn: []status.Job{status.JobSuccess}}}) {
		t.Fatalf("test needs = %+v", test.Needs)
	}
	legs, err := ExpandMatrix(&test)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range legs {
		names = append(names, l.Name)
	}
	want := []string{"test (pg, 20)", "test (pg, 22)", "test (mysql, 22)", "test (24, pg)"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("legs = %q, want %q", names, want)
	}
	if !reflect.DeepEqual(legs[3].Keys, []string{"node", "db"}) || !reflect.DeepEqual(legs[0].Keys, []string{"db", "node"}) {
		t.Fatalf("leg keys = %v / %v", legs[0].Keys, legs[3].Keys)
	}
	// Include order survives a marshal round trip.
	b, err := json.Marshal(test)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"include":[{"node":"24","db":"pg"}]`) {
		t.Fatalf("include order lost: %s", b)
	}
}

func TestParseRejects(t *testing.T) {
	valid := string(exampleLock(t))
	cases := []struct {
		name, doc, want string
	}{
		{"empty", "", "no content"},
		{"not object", "[1]", "not a JSON object"},
		{"bad json", "{", "JSON parse failure"},
		{"no version", `{"workflows":[]}`, "missing or non-numeric schemaVersion"},
		{"string version", `{"schemaVersion":"29"}`, "missing or non-numeric schemaVersion"},
		{"old version", strings.Replace(valid, `"schemaVersion": 29`, `"schemaVersion": 28`, 1), "schema version 28 is not supported"},
		{"plain string label", strings.Replace(valid, `"runsOn": [{"kind": "exact", "value": "deploy"}]`, `"runsOn": ["deploy"]`, 1),
			`workflow "release" job "publish" runsOn[0]: invalid label matcher "deploy"`},
		{"unknown kind", strings.Replace(valid, `{"kind": "exact", "value": "deploy"}`, `{"kind": "glob", "value": "deploy"}`, 1), "invalid label matcher"},
		{"redos", strings.Replace(valid, `".*-canary$"`, `"(a+)+$"`, 1), `job "fleet-smoke" runsOnAll.exclude[0]: regex /(a+)+$/ is ReDoS-prone`},
		{"lookahead label", strings.Replace(valid, `".*-canary$"`, `"^(?!x)y"`, 1), "lookahead assertions"},
		{"bad pattern type", strings.Replace(valid, `{"type": "glob", "pattern": "main"}`, `{"type": "prefix", "pattern": "main"}`, 1), `trigger 1 (pr) targetBranches: pattern "main" has type "prefix"`},
		{"bad trigger regex", strings.Replace(valid, `"^v\\d+\\.\\d+\\.\\d+$"`, `"(?<=v)1"`, 1), "lookbehind"},
		{"empty runOn", strings.Replace(valid, `{"group": "shards", "runOn": ["success", "skipped"]}`, `{"group": "shards", "runOn": []}`, 1), "runOn must not be empty"},
		{"too big", `{"schemaVersion":29,"x":"` + strings.Repeat("a", MaxLockSize) + `"}`, "exceeds the"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.doc == valid {
				t.Fatal("replacement did not apply")
			}
			_, err := Parse([]byte(c.doc))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse error = %v, want containing %q", err, c.want)
			}
		})
	}
}

func TestExpandMatrix(t *testing.T) {
	mk := func(values string, include, exclude []map[string]string) *Job {
		return &Job{Name: "j", Matrix: &Matrix{Type: MatrixStatic, Values: json.RawMessage(values)}, Include: include, Exclude: exclude}
	}
	names := func(legs []Leg) []string {
		var out []string
		for _, l := range legs {
			out = append(out, l.Name)
		}
		return out
	}
	big := `{"a":[` + strings.Repeat(`"x",`, 16) + `"x"],"b":[` + strings.Repeat(`"y",`, 15) + `"y"]}` // 17*16 = 272
	cases := []struct {
		name    string
		job     *Job
		want    []string
		wantErr string
	}{
		{"no matrix", &Job{Name: "j"}, []string{"j"}, ""},
		{"list", mk(`["a","b"]`, nil, nil), []string{"j (a)", "j (b)"}, ""},
		{"list numbers", mk(`[20, 22]`, nil, nil), []string{"j (20)", "j (22)"}, ""},
		{"sorted dims, last fastest", mk(`{"os":["linux","mac"],"go":["1.22","1.23"]}`, nil, nil),
			[]string{"j (1.22, linux)", "j (1.22, mac)", "j (1.23, linux)", "j (1.23, mac)"}, ""},
		{"case-insensitive dim sort", mk(`{"b":["1"],"A":["2"],"a":["3"]}`, nil, nil), []string{"j (3, 2, 1)"}, ""},
		{"exclude partial entry", mk(`{"os":["linux","mac"],"go":["1","2"]}`, nil, []map[string]string{{"os": "mac"}, {}}),
			[]string{"j (1, linux)", "j (2, linux)"}, ""},
		{"include identical skipped", mk(`{"os":["linux"]}`, []map[string]string{{"os": "linux"}, {}, {"os": "bsd", "arch": "arm"}}, nil),
			[]string{"j (linux)", "j (arm, bsd)"}, ""},
		{"empty object", mk(`{}`, nil, nil), nil, "no legs"},
		{"empty dimension", mk(`{"a":[],"b":["1"]}`, nil, nil), nil, "no legs"},
		{"all excluded", mk(`["a"]`, nil, []map[string]string{{"value": "a"}}), nil, "no legs"},
		{"too many", mk(big, nil, nil), nil, "maximum 256"},
		{"dynamic", &Job{Name: "j", Matrix: &Matrix{Type: "dynamic"}}, nil, "not supported"},
		{"bad values", mk(`"x"`, nil, nil), nil, "list or an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			legs, err := ExpandMatrix(c.job)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(legs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("legs = %q, want %q", got, c.want)
			}
		})
	}
}

func TestLocaleCompare(t *testing.T) {
	ordered := []string{"_x", "24, pg", "a", "A", "ab", "B", "mysql, 22", "pg, 20", "pg, 22", "z"}
	for i := range ordered {
		for j := range ordered {
			got := LocaleCompare(ordered[i], ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("LocaleCompare(%q, %q) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
}

func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ".kici", "workflows")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
