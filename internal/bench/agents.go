package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// protoAgent is a lightweight protocol client: it authenticates and
// registers like kici-agent and then only holds its socket open.
type protoAgent struct{ ws *websocket.Conn }

func dialAgent(ctx context.Context, url, token, id string) (*protoAgent, error) {
	ws, err := handshake(ctx, url, token, id, []string{"bench-idle"})
	if err != nil {
		return nil, err
	}
	// Keep reading (pings, heartbeats) so the socket stays healthy.
	go func() {
		for {
			if _, _, err := ws.Read(context.Background()); err != nil {
				return
			}
		}
	}()
	return &protoAgent{ws: ws}, nil
}

// rssResult is the orchestrator's memory with and without agents.
type rssResult struct {
	idleKB, idleAnonKB, withKB, afterKB, afterAnonKB, agents int
}

// agentMemory connects n protocol clients, measures the orchestrator's RSS,
// disconnects them and measures it again idleSettle later; res holds its
// idle reading, taken by the caller (the engines' at the same moment).
func agentMemory(ctx context.Context, o *orch, n int, res rssResult) (rssResult, error) {
	res.agents = n
	token, err := o.mintToken("bench-idle")
	if err != nil {
		return res, err
	}
	wsURL := "ws" + strings.TrimPrefix(o.url, "http") + "/ws"
	var agents []*protoAgent
	for i := 0; i < n; i++ {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a, err := dialAgent(dctx, wsURL, token, fmt.Sprintf("bench-agent-%04d", i))
		cancel()
		if err != nil {
			for _, a := range agents {
				a.ws.CloseNow()
			}
			return res, fmt.Errorf("agent %d: %w", i, err)
		}
		agents = append(agents, a)
	}
	time.Sleep(time.Second)
	res.withKB = o.rssKB()
	for _, a := range agents {
		_ = a.ws.Close(websocket.StatusNormalClosure, "bench done")
	}
	// About as long after they left as idle is read after the start, so
	// that each reading comes about as long after a release of the
	// binary's pages: the node's start-up's for idle, for this one the
	// memory trim's, 2-4 s after the disconnects (unless a trim less than
	// a minute before, during the connects, made the server skip it).
	time.Sleep(idleSettle)
	res.afterKB, res.afterAnonKB = rssParts(o.cmd.Process.Pid)
	return res, nil
}
