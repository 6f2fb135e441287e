package auth

import "slices"

// Role is an admin token's or a signed-in user's role: RoleOwner, RoleAdmin
// or RoleAuditor (KiCI admin_tokens.role, see
// docs/kici-compatibility.md#admin-api).
type Role string

// Roles of admin API tokens (KiCI admin_tokens.role).
const (
	// RoleOwner holds every permission.
	RoleOwner Role = "owner"
	// RoleAdmin holds every permission but the token and key management ones.
	RoleAdmin Role = "admin"
	// RoleAuditor holds the reads that reveal no credential.
	RoleAuditor Role = "auditor"
)

// Permission names an action an admin token's role may hold: one of the
// Perm* constants (KiCI's permission names and kici's own, see
// docs/kici-compatibility.md#admin-api).
type Permission string

// Permissions checked by admin routes. The first 23 are KiCI's exact set
// (@kici-dev/orchestrator 0.9.1; see docs/kici-compatibility.md#admin-api).
// The source.*, agent.* and agent_token.*
// permissions are kici's own: KiCI gates generic sources with context.* and
// leaves GitHub sources, fleet listings and several other families ungated
// ; kici gates every route, so those families get explicit names here.
const (
	PermContextCreate       Permission = "context.create"
	PermContextUpdate       Permission = "context.update"
	PermContextDelete       Permission = "context.delete"
	PermContextRead         Permission = "context.read"
	PermSecretRead          Permission = "secret.read"
	PermSecretWrite         Permission = "secret.write"
	PermSecretDelete        Permission = "secret.delete"
	PermSecretReveal        Permission = "secret.reveal"
	PermAuditRead           Permission = "audit.read"
	PermTokenManage         Permission = "token.manage"
	PermKeyRotate           Permission = "key.rotate"
	PermRunRead             Permission = "run.read"
	PermRunCancel           Permission = "run.cancel"
	PermEventLogRead        Permission = "event_log.read"
	PermEventLogReadPayload Permission = "event_log.read_payload"
	PermAccessLogRead       Permission = "access_log.read"
	PermScheduledJobTrigger Permission = "scheduled_job.trigger"
	PermAttestationRetry    Permission = "attestation.retry"
	PermEventDLQRead        Permission = "event_dlq.read"
	PermEventDLQManage      Permission = "event_dlq.manage"
	PermOrchestratorDrain   Permission = "orchestrator.drain"
	PermCITrustRead         Permission = "ci_trust.read"
	PermCITrustAdmin        Permission = "ci_trust.admin"
	PermSourceRead          Permission = "source.read"
	PermSourceCreate        Permission = "source.create"
	PermSourceUpdate        Permission = "source.update"
	PermSourceDelete        Permission = "source.delete"
	PermSourceTrigger       Permission = "source.trigger"
	PermSourceSecretRead    Permission = "source.secret.read"
	PermAgentRead           Permission = "agent.read"
	PermAgentManage         Permission = "agent.manage"
	PermAgentTokenManage    Permission = "agent_token.manage"
	PermSettingsRead        Permission = "settings.read"
	PermSettingsWrite       Permission = "settings.write"
	PermDatabaseAdmin       Permission = "database.admin"
	PermRunRerun            Permission = "run.rerun" // kici's own: KiCI offers reruns only through its platform
	PermSecretList          Permission = "secret.list"
)

// Role sets used by the matrix below.
var (
	allRoles   = []Role{RoleOwner, RoleAdmin, RoleAuditor}
	ownerAdmin = []Role{RoleOwner, RoleAdmin}
	ownerOnly  = []Role{RoleOwner}
)

// rolePermissions is the single role × permission matrix. Rows marked KiCI are
// KiCI's role sets (owner 23, admin 21, auditor 6),
// with one departure: ci_trust.read is held by every role (auditor 7).
// Rows marked kici are additions for families KiCI leaves ungated; their
// role sets mirror the closest KiCI permission (writes like context.create;
// credentials like token.manage). Every read is open to an auditor except
// credential values (source.secret.read, secret.reveal) and token listings
// (token.manage, agent_token.manage).
var rolePermissions = map[Permission][]Role{
	// KiCI
	PermContextCreate:       ownerAdmin,
	PermContextUpdate:       ownerAdmin,
	PermContextDelete:       ownerAdmin,
	PermContextRead:         allRoles,
	PermSecretRead:          ownerAdmin,
	PermSecretWrite:         ownerAdmin,
	PermSecretDelete:        ownerAdmin,
	PermSecretReveal:        ownerAdmin,
	PermAuditRead:           allRoles,
	PermTokenManage:         ownerOnly,
	PermKeyRotate:           ownerOnly,
	PermRunRead:             allRoles,
	PermRunCancel:           ownerAdmin,
	PermEventLogRead:        allRoles,
	PermEventLogReadPayload: ownerAdmin,
	PermAccessLogRead:       allRoles,
	PermScheduledJobTrigger: ownerAdmin,
	PermAttestationRetry:    ownerAdmin,
	PermEventDLQRead:        allRoles,
	PermEventDLQManage:      ownerAdmin,
	PermOrchestratorDrain:   ownerAdmin,
	// kici departure: KiCI gives ci_trust.read to owner and admin only.
	// Reading who waits for an approval and which fork policy is in force
	// is auditing, so every role holds it; deciding stays ci_trust.admin.
	PermCITrustRead:  allRoles,
	PermCITrustAdmin: ownerAdmin,
	// kici (families KiCI leaves ungated or gates by a borrowed name)
	PermSourceRead:       allRoles,   // KiCI: context.read
	PermSourceCreate:     ownerAdmin, // KiCI: context.create
	PermSourceUpdate:     ownerAdmin, // KiCI: context.update
	PermSourceDelete:     ownerAdmin, // KiCI: context.delete
	PermSourceTrigger:    ownerAdmin, // KiCI: context.create (events/emit)
	PermSourceSecretRead: ownerAdmin, // webhook secret: like secret.reveal
	PermAgentRead:        allRoles,   // KiCI: fleet, ungated
	PermAgentManage:      ownerAdmin, // KiCI: fleet, ungated
	PermAgentTokenManage: ownerOnly,  // KiCI: token.manage
	// Settings, drain state and signing-key metadata carry no credential;
	// an auditor reads them (KiCI gates cluster settings with secret.read).
	PermSettingsRead:  allRoles,
	PermSettingsWrite: ownerAdmin, // KiCI: secret.write
	PermDatabaseAdmin: ownerOnly,  // KiCI: db migrate, ungated
	PermRunRerun:      ownerAdmin, // KiCI: platform-only rerun; like run.cancel
	// Secret scope and key NAMES (never values): KiCI lists them under
	// secret.read, which would also hide them from an auditor checking
	// what exists.
	PermSecretList: allRoles,
}

// permsByRole is rolePermissions inverted, built once.
var permsByRole = func() map[Role]map[Permission]bool {
	m := map[Role]map[Permission]bool{}
	for perm, roles := range rolePermissions {
		for _, r := range roles {
			if m[r] == nil {
				m[r] = map[Permission]bool{}
			}
			m[r][perm] = true
		}
	}
	return m
}()

// HasPermission reports whether role holds perm. Unknown roles and unknown
// permissions hold nothing.
func HasPermission(role Role, perm Permission) bool { return permsByRole[role][perm] }

// IsRole reports whether role is one of owner, admin, auditor.
func IsRole(role Role) bool {
	return role == RoleOwner || role == RoleAdmin || role == RoleAuditor
}

// IsPermission reports whether perm is a permission of the matrix.
func IsPermission(perm Permission) bool { _, ok := rolePermissions[perm]; return ok }

// Permissions returns every permission name, sorted.
func Permissions() []Permission {
	out := make([]Permission, 0, len(rolePermissions))
	for p := range rolePermissions {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
