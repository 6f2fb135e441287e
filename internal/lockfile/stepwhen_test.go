package lockfile

import (
	"reflect"
	"strings"
	"testing"
)

func TestStepWhenCompilesToRunOn(t *testing.T) {
	lf, err := compileOne(t, `name: w
on: {push: {branches: [main]}}
jobs:
  deploy:
    steps:
      - run: make deploy
      - name: report
        when: on-failure
        run: echo failed
      - name: unlock
        when: always
        run: terraform force-unlock
      - name: release
        when: [cancelled, failed]
        run: echo release
      - name: plain
        when: on-success
        run: echo ok
`)
	if err != nil {
		t.Fatal(err)
	}
	steps := lf.Workflows[0].Jobs[0].Steps
	want := [][]string{nil, {"failed"}, {"success", "failed", "cancelled"}, {"failed", "cancelled"}, nil}
	for i, w := range want {
		if !reflect.DeepEqual(steps[i].RunOn, w) {
			t.Errorf("step %d runOn = %v, want %v", i, steps[i].RunOn, w)
		}
	}
	b, err := Encode(lf)
	if err != nil {
		t.Fatal(err)
	}
	if compact := strings.Join(strings.Fields(string(b)), ""); !strings.Contains(compact, `"runOn":["failed","cancelled"]`) {
		t.Errorf("lock lacks the canonical runOn list:\n%s", b)
	}
}

func TestStepWhenRejectsUnknownStates(t *testing.T) {
	for _, when := range []string{"sometimes", "[skipped]", "[]"} {
		_, err := compileOne(t, `name: w
on: {push: {branches: [main]}}
jobs:
  j:
    steps:
      - run: echo
        when: `+when+"\n")
		if err == nil || !strings.Contains(err.Error(), "when") {
			t.Errorf("when: %s: err = %v, want a `when` error", when, err)
		}
	}
}

func TestStepRuns(t *testing.T) {
	cases := []struct {
		runOn []string
		state string
		want  bool
	}{
		{nil, "success", true}, {nil, "failed", false}, {nil, "cancelled", false},
		{[]string{"cancelled"}, "cancelled", true}, {[]string{"cancelled"}, "success", false},
		{[]string{"success", "failed", "cancelled"}, "failed", true},
	}
	for _, c := range cases {
		if got := StepRuns(c.runOn, c.state); got != c.want {
			t.Errorf("StepRuns(%v, %s) = %v", c.runOn, c.state, got)
		}
	}
}
