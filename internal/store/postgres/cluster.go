package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"kici.dev/kici/internal/store"
)

var _ store.ClusterSettingsStore = (*Store)(nil)

// versionRow is the cluster_settings row that holds the settings version.
const versionRow = "_version"

type pgQueryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// GetClusterSettings returns the overrides and the version.
func (s *Store) GetClusterSettings(ctx context.Context) (*store.ClusterSettings, error) {
	return readClusterSettings(ctx, s.pool)
}

func readClusterSettings(ctx context.Context, q pgQueryer) (*store.ClusterSettings, error) {
	rows, err := q.Query(ctx, `SELECT name, value, updated_at FROM cluster_settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cs := &store.ClusterSettings{Values: map[string]int64{}}
	for rows.Next() {
		var name string
		var v, at int64
		if err := rows.Scan(&name, &v, &at); err != nil {
			return nil, err
		}
		if name == versionRow {
			cs.Version = v
			cs.UpdatedAt = time.UnixMilli(at).UTC()
			continue
		}
		cs.Values[name] = v
	}
	return cs, rows.Err()
}

// PatchClusterSettings sets and resets knobs in one transaction (the
// version row is locked first so concurrent patches serialise).
func (s *Store) PatchClusterSettings(ctx context.Context, set map[string]int64, reset []string) (*store.ClusterSettings, error) {
	var out *store.ClusterSettings
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		t := now().UnixMilli()
		if _, err := tx.Exec(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES ($1, 0, $2) ON CONFLICT (name) DO NOTHING`, versionRow, t); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM cluster_settings WHERE name = $1 FOR UPDATE`, versionRow); err != nil {
			return err
		}
		cur, err := readClusterSettings(ctx, tx)
		if err != nil {
			return err
		}
		changed := false
		for name, v := range set {
			if old, ok := cur.Values[name]; ok && old == v {
				continue
			}
			changed = true
			if _, err := tx.Exec(ctx, `INSERT INTO cluster_settings (name, value, updated_at) VALUES ($1,$2,$3)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, name, v, t); err != nil {
				return err
			}
		}
		for _, name := range reset {
			if _, ok := cur.Values[name]; !ok {
				continue
			}
			changed = true
			if _, err := tx.Exec(ctx, `DELETE FROM cluster_settings WHERE name = $1`, name); err != nil {
				return err
			}
		}
		if changed {
			if _, err := tx.Exec(ctx, `UPDATE cluster_settings SET value = value + 1, updated_at = $2 WHERE name = $1`, versionRow, t); err != nil {
				return err
			}
		}
		out, err = readClusterSettings(ctx, tx)
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	return out, nil
}
