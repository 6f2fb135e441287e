package api

import (
	"net/http"

	"kici.dev/kici/internal/runstream"
)

// runEvents is GET /runs/{runId}/events: the run's status changes as
// Server-Sent Events (runstream.Streamer.RunEvents).
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	s.streamer().RunEvents(w, r)
}

// stepLogStream is GET /runs/{runId}/jobs/{jobId}/steps/{i}/logs/stream: a
// step's log lines as Server-Sent Events, resumable with Last-Event-ID
// (runstream.Streamer.StepLogs).
func (s *server) stepLogStream(w http.ResponseWriter, r *http.Request) {
	s.streamer().StepLogs(w, r)
}

func (s *server) streamer() *runstream.Streamer {
	st := &runstream.Streamer{Store: s.d.Store}
	if s.d.Logs != nil {
		st.Logs = s.d.Logs
	}
	return st
}
