package web

import (
	"fmt"
	"sort"

	"kici.dev/kici/internal/runs/status"
	"kici.dev/kici/internal/store"
)

// Graph geometry, in SVG user units. A box is wide enough for the
// longest job name of the run (a matrix leg's full name, e.g. "test
// (1.22, linux, amd64)"), at labelCharW units a character plus room for
// the duration, between nodeW and maxNodeW; longer names are shortened
// in the box and given whole in its tooltip.
const (
	nodeW, nodeH = 190, 34
	maxNodeW     = 460
	labelCharW   = 7
	durRoom      = 74
	colGap       = 60
	rowGap       = 14
	pad          = 10
)

// graphNode is one job box of the needs graph.
type graphNode struct {
	X, Y, W, H int
	// TX, TY place the label; Label is the (shortened) job name, Name the
	// full one (shown as the box's tooltip).
	TX, TY, DX  int
	Label, Name string
	Status      status.Job
	Href        string
	JobID       string
	Dur         string
}

// graphEdge is one needs edge, drawn from the upstream job's right side to
// the downstream job's left side.
type graphEdge struct {
	D string // SVG path data (numbers only)
}

// needsGraph is the layered drawing of a run's jobs.
type needsGraph struct {
	W, H  int
	Nodes []graphNode
	Edges []graphEdge
}

// layoutGraph places each job in the column of its longest chain of
// needs (column 0: no needs), in creation order within a column, and an
// edge for every need whose upstream is a job of the run. A cycle (which
// the compiler refuses) cannot loop: depth is capped by the job count.
func layoutGraph(runID string, jobs []*store.Job) needsGraph {
	byName := map[string][]int{}
	for i, j := range jobs {
		byName[j.JobName] = append(byName[j.JobName], i)
		if j.BaseJobName != "" && j.BaseJobName != j.JobName {
			byName[j.BaseJobName] = append(byName[j.BaseJobName], i)
		}
	}
	depth := make([]int, len(jobs))
	for pass := 0; pass < len(jobs); pass++ {
		changed := false
		for i, j := range jobs {
			for _, n := range j.Needs {
				for _, up := range byName[n.Upstream] {
					if up != i && depth[up]+1 > depth[i] && depth[up]+1 < len(jobs) {
						depth[i] = depth[up] + 1
						changed = true
					}
				}
			}
		}
		if !changed {
			break
		}
	}
	cols := map[int][]int{}
	maxCol := 0
	for i := range jobs {
		cols[depth[i]] = append(cols[depth[i]], i)
		maxCol = max(maxCol, depth[i])
	}
	g := needsGraph{Nodes: make([]graphNode, len(jobs))}
	longest := 0
	for _, j := range jobs {
		longest = max(longest, len([]rune(j.JobName)))
	}
	w := min(max(nodeW, longest*labelCharW+durRoom), maxNodeW)
	labelMax := (w - durRoom) / labelCharW
	maxRows := 0
	for c := 0; c <= maxCol; c++ {
		idx := cols[c]
		sort.Ints(idx)
		maxRows = max(maxRows, len(idx))
		for row, i := range idx {
			j := jobs[i]
			x := pad + c*(w+colGap)
			y := pad + row*(nodeH+rowGap)
			n := graphNode{X: x, Y: y, W: w, H: nodeH, TX: x + 10, TY: y + 22, DX: x + w - 8,
				Label: truncate(labelMax, j.JobName), Name: j.JobName, Status: j.Status, JobID: j.ID,
				Href: "/ui/runs/" + runID + "/jobs/" + j.ID}
			n.Dur = jobDur(j.Status, j.DurationMs)
			g.Nodes[i] = n
		}
	}
	for i, j := range jobs {
		for _, n := range j.Needs {
			for _, up := range byName[n.Upstream] {
				if up == i {
					continue
				}
				a, b := g.Nodes[up], g.Nodes[i]
				x1, y1 := a.X+a.W, a.Y+a.H/2
				x2, y2 := b.X, b.Y+b.H/2
				mx := (x1 + x2) / 2
				g.Edges = append(g.Edges, graphEdge{D: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mx, y1, mx, y2, x2, y2)})
			}
		}
	}
	g.W = 2*pad + (maxCol+1)*w + maxCol*colGap
	g.H = 2*pad + max(maxRows, 1)*(nodeH+rowGap) - rowGap
	return g
}
