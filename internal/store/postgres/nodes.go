package postgres

import (
	"context"

	"kici.dev/kici/internal/store"
)

// HeartbeatNode upserts n's row (not its drain flag) and returns the flag.
func (s *Store) HeartbeatNode(ctx context.Context, n *store.ClusterNode) (bool, error) {
	var draining bool
	err := s.pool.QueryRow(ctx, `INSERT INTO cluster_nodes (id, address, version, started_at, heartbeat_at, jobs_running)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET address = excluded.address, version = excluded.version, started_at = excluded.started_at,
			heartbeat_at = excluded.heartbeat_at, jobs_running = excluded.jobs_running
		RETURNING draining`, n.ID, n.Address, n.Version, n.StartedAt.UTC(), n.HeartbeatAt.UTC(), n.JobsRunning).Scan(&draining)
	return draining, mapErr(err)
}

// ListNodes returns every node by id.
func (s *Store) ListNodes(ctx context.Context) ([]*store.ClusterNode, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, address, version, started_at, heartbeat_at, draining, jobs_running FROM cluster_nodes ORDER BY id`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []*store.ClusterNode
	for rows.Next() {
		n := &store.ClusterNode{}
		if err := rows.Scan(&n.ID, &n.Address, &n.Version, &n.StartedAt, &n.HeartbeatAt, &n.Draining, &n.JobsRunning); err != nil {
			return nil, err
		}
		n.StartedAt, n.HeartbeatAt = n.StartedAt.UTC(), n.HeartbeatAt.UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}

// SetNodeDraining sets the drain flag of one node or ("" id) all.
func (s *Store) SetNodeDraining(ctx context.Context, id string, on bool) error {
	if id == "" {
		_, err := s.pool.Exec(ctx, `UPDATE cluster_nodes SET draining = $1`, on)
		return mapErr(err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE cluster_nodes SET draining = $1 WHERE id = $2`, on, id)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}
