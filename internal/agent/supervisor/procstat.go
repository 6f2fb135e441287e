package supervisor

import (
	"os"
	"strconv"
	"strings"
)

// EachLiveProcess calls fn with the pid, parent pid and process group of
// every live (non-zombie) process, read from /proc (none where /proc is
// absent).
func EachLiveProcess(fn func(pid, ppid, pgrp int)) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')') // the command name may hold anything
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+1:])
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		fn(pid, ppid, pgrp)
	}
}

// descendants returns the descendants of root: from the kernel's lists of
// each process's children (/proc/<pid>/task/<tid>/children), which costs
// in proportion to the step's own processes, else from a scan of every
// process of the host.
func descendants(root int) []int {
	if out, ok := descendantsByChildren(root); ok {
		return out
	}
	return descendantsByScan(root)
}

// descendantsByChildren walks the children lists down from root; ok is
// false where the kernel has no such lists (CONFIG_PROC_CHILDREN).
func descendantsByChildren(root int) (out []int, ok bool) {
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		if err != nil {
			if p == root {
				return nil, false
			}
			continue // ended meanwhile
		}
		for _, t := range tasks {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + t.Name() + "/children")
			if err != nil {
				if p == root && os.IsNotExist(err) {
					return nil, false
				}
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out, true
}

// descendantsByScan finds root's live descendants by reading every
// process's parent.
func descendantsByScan(root int) []int {
	children := map[int][]int{}
	EachLiveProcess(func(pid, ppid, _ int) { children[ppid] = append(children[ppid], pid) })
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}
