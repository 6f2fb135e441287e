package dispatch

import (
	"context"
	"encoding/json"

	"kici.dev/kici/internal/protocol"
)

// storeOutputs keeps the outputs a finished job reported, before the
// tracker evaluates the jobs that need it. The agent runs untrusted steps,
// so the report is checked again here: only names the lock job declares
// are kept, and a report over protocol.MaxJobOutputBytes is dropped
// whole (the agent enforces the cap; a larger report means a modified
// agent).
func (fr *frameHandler) storeOutputs(ctx context.Context, jobID string, data *protocol.JobStatusData) {
	if data == nil || len(data.Outputs) == 0 {
		return
	}
	job, err := fr.st.GetJob(ctx, jobID)
	if err != nil {
		fr.log.Warn("job outputs: read job", "job", jobID, "err", err)
		return
	}
	var cfg struct {
		Outputs map[string]string `json:"outputs"`
	}
	_ = json.Unmarshal(job.Config, &cfg)
	keep := map[string]string{}
	total := 0
	for k, v := range data.Outputs {
		total += len(k) + len(v)
		if _, declared := cfg.Outputs[k]; declared {
			keep[k] = v
		}
	}
	if total > protocol.MaxJobOutputBytes {
		fr.log.Warn("job outputs over the limit; dropped", "job", jobID, "bytes", total, "limit", protocol.MaxJobOutputBytes)
		return
	}
	if len(keep) == 0 {
		return
	}
	if err := fr.st.PutJobOutputs(ctx, jobID, keep); err != nil {
		fr.log.Error("store job outputs", "job", jobID, "err", err)
	}
}
