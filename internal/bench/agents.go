package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"kici.dev/kici/internal/protocol"
)

// protoAgent is a lightweight protocol client: it authenticates and
// registers like kici-agent and then only holds its socket open.
type protoAgent struct{ ws *websocket.Conn }

func dialAgent(ctx context.Context, url, token, id string) (*protoAgent, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	send := func(v any) error {
		b, _ := json.Marshal(v)
		return ws.Write(ctx, websocket.MessageText, b)
	}
	recv := func(want string) error {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return err
		}
		var env protocol.Envelope
		_ = json.Unmarshal(b, &env)
		if env.Type != want {
			return fmt.Errorf("got %s, want %s: %s", env.Type, want, b)
		}
		return nil
	}
	if err := send(&protocol.AuthRequest{Type: protocol.TypeAuthRequest, Token: token, ProtocolVersion: protocol.Version}); err != nil {
		return nil, err
	}
	if err := recv(protocol.TypeAuthSuccess); err != nil {
		ws.CloseNow()
		return nil, err
	}
	if err := send(&protocol.AgentRegister{Type: protocol.TypeAgentRegister, MessageID: uuid.NewString(), AgentID: id,
		Labels: []string{"bench-idle"}, Version: "bench", Hostname: "bench"}); err != nil {
		ws.CloseNow()
		return nil, err
	}
	if err := recv(protocol.TypeRegisterAck); err != nil {
		ws.CloseNow()
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
	idleKB, withKB, afterKB, agents int
}

// agentMemory connects n protocol clients, measures the orchestrator's RSS,
// disconnects them and measures it again.
func agentMemory(ctx context.Context, o *orch, n int) (rssResult, error) {
	res := rssResult{idleKB: o.rssKB(), agents: n}
	out, err := o.admin("agent", "register", "--labels", "bench-idle")
	if err != nil {
		return res, err
	}
	var token string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "token:"); ok {
			token = strings.TrimSpace(v)
		}
	}
	if token == "" {
		return res, fmt.Errorf("no token in %q", out)
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
	time.Sleep(5 * time.Second)
	res.afterKB = o.rssKB()
	return res, nil
}
