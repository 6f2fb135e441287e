package sqlstore

import (
	"context"

	"kici.dev/kici/internal/store"
)

// HeartbeatNode upserts n's row (not its drain flag) and returns the flag.
func (s *Store) HeartbeatNode(ctx context.Context, n *store.ClusterNode) (bool, error) {
	var draining bool
	// compressed_logs_since is the row's started_at when the process reads
	// compressed chunks (migration node_log_forms says why).
	var since any
	if n.ReadsCompressedLogs {
		since = s.d.ts(n.StartedAt)
	}
	err := s.queryRow(ctx, `INSERT INTO cluster_nodes (id, address, version, started_at, heartbeat_at, jobs_running, agents_connected, compressed_logs_since)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version, started_at = excluded.started_at,
			heartbeat_at = excluded.heartbeat_at, jobs_running = excluded.jobs_running, agents_connected = excluded.agents_connected,
			compressed_logs_since = excluded.compressed_logs_since
		RETURNING draining`, n.ID, n.Address, n.Version, s.d.ts(n.StartedAt), s.d.ts(n.HeartbeatAt), n.JobsRunning, n.AgentsConnected, since).Scan(&draining)
	return draining, mapErr(err)
}

// ListNodes returns every node by id.
func (s *Store) ListNodes(ctx context.Context) ([]*store.ClusterNode, error) {
	rows, err := s.query(ctx, `SELECT id, address, version, started_at, heartbeat_at, draining, jobs_running, agents_connected,
		(compressed_logs_since IS NOT NULL AND compressed_logs_since = started_at) FROM cluster_nodes ORDER BY id`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.ClusterNode
	for rows.Next() {
		n := &store.ClusterNode{}
		if err := rows.Scan(&n.ID, &n.Address, &n.Version, tcol(&n.StartedAt), tcol(&n.HeartbeatAt), &n.Draining, &n.JobsRunning, &n.AgentsConnected, &n.ReadsCompressedLogs); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// SetNodeDraining sets the drain flag of one node or ("" id) all.
func (s *Store) SetNodeDraining(ctx context.Context, id string, on bool) error {
	if id == "" {
		_, err := s.exec(ctx, `UPDATE cluster_nodes SET draining = ?`, on)
		return mapErr(err)
	}
	return affected(s.exec(ctx, `UPDATE cluster_nodes SET draining = ? WHERE id = ?`, on, id))
}

// RemoveNode deletes one node's row.
func (s *Store) RemoveNode(ctx context.Context, id string) error {
	return affected(s.exec(ctx, `DELETE FROM cluster_nodes WHERE id = ?`, id))
}

// ListLeases returns every lease by name.
func (s *Store) ListLeases(ctx context.Context) ([]*store.Lease, error) {
	rows, err := s.query(ctx, `SELECT name, holder, expires_at FROM leases ORDER BY name`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.Lease
	for rows.Next() {
		l := &store.Lease{}
		if err := rows.Scan(&l.Name, &l.Holder, tcol(&l.ExpiresAt)); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
