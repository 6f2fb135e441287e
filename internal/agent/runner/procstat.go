package runner

import (
	"os"
	"strconv"
	"strings"
)

// eachLiveProcess calls fn with the pid, parent pid and process group of
// every live (non-zombie) process, read from /proc (none where /proc is
// absent).
func eachLiveProcess(fn func(pid, ppid, pgrp int)) {
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

// descendants returns the live descendants of root.
func descendants(root int) []int {
	children := map[int][]int{}
	eachLiveProcess(func(pid, ppid, _ int) { children[ppid] = append(children[ppid], pid) })
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
