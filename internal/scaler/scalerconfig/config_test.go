package scalerconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fullConfig = `version: 1
globalMaxAgents: 24
defaults:
  resources: { cpus: 1, memory: 1g }
scalers:
  - name: linux-ctr
    type: container
    maxAgents: 12
    maxConcurrentSpawns: 4
    orchestratorUrl: ws://172.30.0.1:4000/ws
    labelSets:
      - labels: [Linux, container]
        image: kici-agent:test
        imagePullPolicy: Never
        resources: { cpus: 2, memory: 512m }
        env: { FOO: bar }
  - name: mac-metal
    type: bare-metal
    maxAgents: 2
    platform: { os: macos, arch: arm64 }
    mandatoryLabels: [xcode]
    roles: []
    enforceCgroups: true
    labelSets:
      - labels: [macos, arm64, xcode]
        binaryPath: /opt/kici/kici-agent
`

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadFullConfigAndDefaults(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "scalers.yaml", fullConfig)
	c, err := Load(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.GlobalMaxAgents != 24 || len(c.Scalers) != 2 {
		t.Fatalf("config %+v", c)
	}
	ctr, mac := c.Scalers[0], c.Scalers[1]
	if ctr.MaxConcurrentSpawns != 4 || mac.MaxConcurrentSpawns != DefaultMaxConcurrentSpawns {
		t.Errorf("maxConcurrentSpawns %d %d", ctr.MaxConcurrentSpawns, mac.MaxConcurrentSpawns)
	}
	if got := ctr.LabelSets[0].Labels; got[0] != "linux" {
		t.Errorf("labels not canonicalised: %v", got)
	}
	if l := c.Limits(ctr.LabelSets[0]); l.NanoCPUs != 2e9 || l.MemoryBytes != 512<<20 {
		t.Errorf("label-set limits %+v", l)
	}
	if l := c.Limits(mac.LabelSets[0]); l.NanoCPUs != 1e9 || l.MemoryBytes != 1<<30 {
		t.Errorf("defaults limits %+v", l)
	}
	// The minimal file gets the defaults.
	p2 := writeFile(t, dir, "min.yaml", "version: 1\nscalers:\n  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x]}]}\n")
	c2, err := Load(p2, "")
	if err != nil {
		t.Fatal(err)
	}
	if c2.GlobalMaxAgents != DefaultGlobalMaxAgents || c2.Scalers[0].MaxConcurrentSpawns != 8 {
		t.Errorf("defaults %+v %+v", c2, c2.Scalers[0])
	}
}

func TestLoadMergesScalersD(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "scalers.yaml", "version: 1\nscalers:\n  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [a]}]}\n")
	writeFile(t, dir, "scalers.d/20-c.yaml", "scalers:\n  - {name: c, type: bare-metal, maxAgents: 1, labelSets: [{labels: [c]}]}\n")
	writeFile(t, dir, "scalers.d/10-b.yml", "scalers:\n  - {name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [b]}]}\n")
	writeFile(t, dir, "scalers.d/notes.txt", "not yaml")
	c, err := LoadConfig(p, "", 4) // scalers.d beside the file is found
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range c.Scalers {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Fatalf("merged order %v", names)
	}
	// a fragment may hold only scalers:
	writeFile(t, dir, "scalers.d/30-bad.yaml", "globalMaxAgents: 3\nscalers: []\n")
	_, err = LoadConfig(p, "", 4)
	if err == nil || !strings.Contains(err.Error(), "30-bad.yaml") || !strings.Contains(err.Error(), "globalMaxAgents") {
		t.Fatalf("fragment with a top-level key: %v", err)
	}
}

func TestConfigErrorsNameFileAndField(t *testing.T) {
	base := "version: 1\nscalers:\n  - name: a\n    type: bare-metal\n    maxAgents: 1\n    labelSets:\n      - labels: [x]\n"
	cases := []struct {
		name, doc string
		want      []string
	}{
		{"unknown top key", base + "colour: blue\n", []string{"unknown field \"colour\"", "[8:1]"}},
		{"unknown entry key", strings.Replace(base, "maxAgents: 1", "maxAgents: 1\n    maxAgent: 2", 1), []string{"unknown field \"maxAgent\""}},
		{"unknown label-set key", base + "        lables: [y]\n", []string{"unknown field \"lables\""}},
		{"kici label", strings.Replace(base, "[x]", "[x, \"kici:os:linux\"]", 1), []string{"scalers[0].labelSets[0].labels[1]", "reserved kici: prefix"}},
		{"bad label", strings.Replace(base, "[x]", "[\"has space\"]", 1), []string{"scalers[0].labelSets[0].labels[0]", "invalid label"}},
		{"version", strings.Replace(base, "version: 1", "version: 2", 1), []string{"version: must be 1"}},
		{"no maxAgents", strings.Replace(base, "maxAgents: 1", "maxAgents: 0", 1), []string{"scalers[0].maxAgents"}},
		{"bad type", strings.Replace(base, "bare-metal", "nomad", 1), []string{"scalers[0].type", "unsupported type"}},
		{"bad name", strings.Replace(base, "name: a", "name: A_b", 1), []string{"scalers[0].name"}},
		{"container without image", strings.Replace(base, "bare-metal", "container", 1), []string{"scalers[0].labelSets[0].image", "required"}},
		{"image on bare-metal", base + "        image: x\n", []string{"scalers[0].labelSets[0].image"}},
		{"bad pull policy", strings.Replace(base, "bare-metal", "container", 1) + "        image: x\n        imagePullPolicy: Sometimes\n", []string{"imagePullPolicy", "Sometimes"}},
		{"bad memory", base + "        resources: {memory: 12q}\n", []string{"scalers[0].labelSets[0].resources", "invalid memory"}},
		{"too many cpus", base + "        resources: {cpus: 300}\n", []string{"cpus must be"}},
		{"mandatory label missing", strings.Replace(base, "maxAgents: 1", "maxAgents: 1\n    mandatoryLabels: [gpu]", 1), []string{"must contain mandatory label \"gpu\""}},
		{"bad platform", strings.Replace(base, "maxAgents: 1", "maxAgents: 1\n    platform: {os: beos, arch: x64}", 1), []string{"scalers[0].platform.os"}},
		{"bad role", strings.Replace(base, "maxAgents: 1", "maxAgents: 1\n    roles: [boss]", 1), []string{"scalers[0].roles[0]"}},
		{"KICI env", base + "        env: {KICI_AGENT_ID: x}\n", []string{"KICI_* variables"}},
		{"cgroups on container", strings.Replace(strings.Replace(base, "bare-metal", "container", 1), "maxAgents: 1", "maxAgents: 1\n    enforceCgroups: true", 1) + "        image: x\n", []string{"enforceCgroups"}},
		{"http url", strings.Replace(base, "maxAgents: 1", "maxAgents: 1\n    orchestratorUrl: http://x", 1), []string{"orchestratorUrl"}},
		{"duplicate name", base + "  - {name: a, type: bare-metal, maxAgents: 1, labelSets: [{labels: [y]}]}\n", []string{"scalers[1].name", "duplicate"}},
		{"overlap", base + "  - {name: b, type: bare-metal, maxAgents: 1, labelSets: [{labels: [x]}]}\n", []string{"scalers[1].labelSets[0].labels", "ambiguous"}},
		{"wrong type", strings.Replace(base, "maxAgents: 1", "maxAgents: many", 1), []string{"scalers.yaml"}},
		{"no scalers", "version: 1\nscalers: []\n", []string{"scalers: at least one"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "scalers.yaml", tc.doc)
			_, err := Load(p, "")
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != p {
				t.Fatalf("error %v does not name the file %s", err, p)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestParseMemory(t *testing.T) {
	for in, want := range map[string]int64{"512m": 512 << 20, "4G": 4 << 30, "1k": 1024, "1048576": 1 << 20, "1.5g": 3 << 29} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "m", "-1m", "1t", "0"} {
		if _, err := ParseMemory(in); err == nil {
			t.Errorf("ParseMemory(%q) accepted", in)
		}
	}
}

func TestDefaultConfigIsHostBareMetal(t *testing.T) {
	c := DefaultConfig(3)
	if len(c.Scalers) != 1 || c.Scalers[0].Type != TypeBareMetal || c.Scalers[0].MaxAgents != 3 || c.Scalers[0].Name != "local" {
		t.Fatalf("default %+v", c.Scalers[0])
	}
	p, explicit := c.Scalers[0].platform()
	if explicit || p != hostPlatform() {
		t.Fatalf("default platform %+v explicit=%v", p, explicit)
	}
}
